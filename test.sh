#!/usr/bin/env bash
# Set up (first time only, with test tools and Chromium) and run the whole test suite.
# The quick loop (`./test.sh -m "not slow"`) runs its test files on two cores (pytest-xdist, one file to
# a worker, so a module's fixtures are built once); the whole suite stays in one process, where the
# browser tests and the servers they start have the machine to themselves.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
parallel=()
case " $* " in *"not slow"*) parallel=(-n 2 --dist loadfile) ;; esac
exec .venv/bin/python -m pytest ${parallel[@]+"${parallel[@]}"} "$@"
