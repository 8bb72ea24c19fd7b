#!/usr/bin/env bash
# Installs redis-server for test/server/redis-event-log.test.ts when it is missing (Debian/Ubuntu).
# The tests start their own throwaway server on a free port; no system service is needed.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server
redis-server --version
