#!/usr/bin/env bash
# Set up (first time only) and start the app on http://localhost:8501 . Extra arguments go to streamlit.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh app
# Beside the server: once it answers, one session starts loading the models, so the first student
# does not wait for them (scripts/warm_server.py).
.venv/bin/python scripts/warm_server.py "$@" &
exec .venv/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@"
