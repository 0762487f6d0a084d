#!/bin/sh
# Install Strata from a source tree into the current Python: the image's only install step.
# The Dockerfile runs it; CI runs it too (tests/infra/test_docker.py, with --dry-run) so a change
# that breaks the image's pip install fails CI without a Docker engine.
#   install.sh SOURCE_DIR [extra pip arguments...]
set -eu
src="${1:?usage: install.sh SOURCE_DIR [pip arguments...]}"
shift
python -m pip install --no-cache-dir --no-compile "$@" "$src"
case " $* " in
  *" --dry-run "*) ;;
  *) strata --version ;;  # the entry point works
esac
