#!/usr/bin/env bash
# Set up (first time only) and start the app on http://localhost:8501 . Extra arguments go to streamlit.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh app
exec .venv/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@"
