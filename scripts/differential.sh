#!/usr/bin/env bash
# Generated native queries vs an independent oracle: scripts/differential.sh --n 5000 --seed 7
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m tests.differential "$@"
