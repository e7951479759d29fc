#!/usr/bin/env bash
# Set up (first time only, with test tools and Chromium) and run the tests.
#   ./test.sh                    the whole suite, in three runs with one exit status: tests/unit, tests/models
#                                and tests/app on two cores (pytest-xdist, one file to a worker, so a
#                                module's fixtures are built once); then tests/browser, two files at a time;
#                                then the browser tests marked `alone`, one at a time
#   ./test.sh -m "not slow" -q   the quick loop: the first run only (every browser test is slow)
#   ./test.sh tests/app/x.py     named files or folders: one process, as given
# Other pytest options pass through to every run.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
pytest=(.venv/bin/python -m pytest)
for arg in "$@"; do
  if [[ $arg == tests* && -e ${arg%%::*} ]]; then exec "${pytest[@]}" "$@"; fi
done

# The whole suite first loads the bundled pair and its feature head once, alone, with the tests' thread
# count and fixed pass costs (as conftest.py sets them): with empty caches the GGUF is converted and the
# layouts and precisions are timed here, while nothing else runs, so the timings are kept and every
# worker and server reads them. (kernels.kept_timings keeps no timing taken beside a busy process, and
# the two workers below keep each other busy.)
case " $* " in
  *"not slow"*) ;;
  *) OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" SPECDEC_PASS_COSTS="${SPECDEC_PASS_COSTS:-1}" .venv/bin/python -c \
       "from specdec.models.pair import ModelPair; from specdec.paths import BUNDLED_HEAD
ModelPair.load().with_drafter(BUNDLED_HEAD)" || echo "test.sh: loading the bundled pair failed; the tests will say why" >&2 ;;
esac

# Files are handed out in collection order (app, models, unit), not by xdist's default of most tests
# first: the few-test files that load the bundled models would come last and leave one core idle,
# where unit's many short files fill the end. pytest's exit status 5 is "no test selected": fine for
# one run if the other ran tests.
"${pytest[@]}" -n 2 --dist loadfile --no-loadscope-reorder --ignore=tests/browser "$@" && parallel=0 || parallel=$?
# The browser tests: two at a time (a server and a browser each leave a core mostly idle, waiting on
# each other), then those marked `alone` one at a time: they time what a user waits for, or start
# several servers (tests/browser/conftest.py picks each lane's tests).
case " $* " in
  *"not slow"*) shared=5 alone=5 ;;
  *) SPECDEC_BROWSER_LANE=shared "${pytest[@]}" -n 2 --dist loadfile tests/browser "$@" && shared=0 || shared=$?
     SPECDEC_BROWSER_LANE=alone "${pytest[@]}" tests/browser "$@" && alone=0 || alone=$? ;;
esac
for status in "$parallel" "$shared" "$alone"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
if [ "$parallel" -eq 5 ] && [ "$shared" -eq 5 ] && [ "$alone" -eq 5 ]; then exit 5; fi
exit 0
