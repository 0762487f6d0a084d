#!/usr/bin/env bash
# The main job: install everything, then run the quickstart cluster on Druid's wikipedia sample.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-system-packages.sh quickstart
scripts/setup-venv.sh
exec .venv/bin/strata quickstart "$@"
