#!/usr/bin/env bash
# The main job: install everything, then run the quickstart cluster on Druid's wikipedia sample.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-system-packages.sh
scripts/setup-venv.sh
if .venv/bin/strata quickstart --help >/dev/null 2>&1; then
  exec .venv/bin/strata quickstart "$@"
fi
.venv/bin/strata --help
