#!/usr/bin/env bash
# Installs the Debian packages Strata needs when missing:
#   scripts/install-system-packages.sh quickstart   what the quickstart cluster runs: ZooKeeper, memcached, Java
#   scripts/install-system-packages.sh test         those, and what only the tests and benchmarks use
set -euo pipefail
what=${1:-quickstart}
need=()
[ -r /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v memcached >/dev/null 2>&1 || need+=(memcached)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
if [ "$what" = test ]; then
  command -v wrk >/dev/null 2>&1 || need+=(wrk)  # bench.throughput's load generator
  [ -x /usr/bin/chromium ] || need+=(chromium)  # the web console's browser tests (tests/console)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)  # network namespaces of tests/multihost (ip netns, ss)
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)  # the PostgreSQL metadata store's tests
elif [ "$what" != quickstart ]; then
  echo "usage: $0 quickstart|test" >&2
  exit 2
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
