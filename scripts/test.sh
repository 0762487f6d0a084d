#!/usr/bin/env bash
# The whole test run: system packages, the virtualenv, lint, types, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# the Debian packages and the virtualenv side by side: neither needs the other, and on a fresh
# machine both are mostly downloads
scripts/install-system-packages.sh test & system=$!
scripts/setup-venv.sh test
wait "$system"
echo "== ruff"
.venv/bin/ruff check .          # one command per line: `set -e` ignores a failure inside an && list
.venv/bin/ruff format --check .
echo "== mypy"; .venv/bin/mypy .
echo "== import layers"; .venv/bin/lint-imports
# two workers, whole modules each, the slow ones first (tests/workers.py); the slowest tests named
echo "== pytest"; .venv/bin/python -m pytest -n 2 --durations=25 "$@"
