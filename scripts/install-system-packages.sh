#!/usr/bin/env bash
# Installs the Debian packages Strata's tests and quickstart use (ZooKeeper, memcached) when missing.
set -euo pipefail
need=()
[ -r /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v memcached >/dev/null 2>&1 || need+=(memcached)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
