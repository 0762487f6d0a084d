#!/usr/bin/env bash
# The main job: install everything, then run the quickstart cluster on Druid's wikipedia sample.
set -euo pipefail
cd "$(dirname "$0")/.."
# the Debian packages and the virtualenv side by side: neither needs the other, and on a fresh
# machine both are mostly downloads
scripts/install-system-packages.sh quickstart & system=$!
scripts/setup-venv.sh
wait "$system"
exec .venv/bin/strata quickstart "$@"
