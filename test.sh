#!/usr/bin/env bash
# Set up (first time only, with test tools and Chromium) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
