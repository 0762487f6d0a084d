#!/usr/bin/env bash
# Installs the Debian packages Strata's tests, quickstart and benchmarks use (ZooKeeper, memcached,
# wrk for bench.throughput, chromium for the console's tests) when missing.
set -euo pipefail
need=()
[ -r /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v memcached >/dev/null 2>&1 || need+=(memcached)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
command -v wrk >/dev/null 2>&1 || need+=(wrk)  # bench.throughput's load generator
[ -x /usr/bin/chromium ] || need+=(chromium)  # the web console's browser tests (tests/console)
command -v ip >/dev/null 2>&1 || need+=(iproute2)  # network namespaces of tests/multihost (ip netns, ss)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)  # the PostgreSQL metadata store's tests
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
