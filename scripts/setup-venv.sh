#!/usr/bin/env bash
# Creates .venv (if missing) and installs Strata into it; pass extras, e.g. `scripts/setup-venv.sh test`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
extras=${1:-}
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
