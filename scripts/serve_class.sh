#!/usr/bin/env bash
# Serve a class: N replicas of the app behind HAProxy, each browser kept on one replica.
#   scripts/serve_class.sh --replicas 2 [--port 8501] [--threads 1] [--address 0.0.0.0]
# Sets up what it needs first (the .venv and Debian's haproxy), like ./start.sh; --help lists the
# options, docs/howto/serve-a-class.md says how to size a room.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh class
exec .venv/bin/python scripts/serve_class.py "$@"
