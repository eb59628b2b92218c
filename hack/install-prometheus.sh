#!/usr/bin/env bash
# prometheus + promtool for the monitoring tests (tests/unit/test_alert_rules.py runs promtool,
# tests/integration/test_prometheus.py starts its own prometheus on a free loopback port).
# Installs Debian's `prometheus` package when they are missing and we are root (CI is); the
# package's own service is not used, and is stopped where systemd started it (it would hold
# port 9090, the operator's default metrics port). Otherwise: one line saying what to do.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing prometheus (Debian package) for the monitoring tests" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  command -v promtool >/dev/null && exit 0
fi
echo "error: prometheus and promtool are needed by the tests: run 'apt-get install -y prometheus'" \
  "as root (Debian/Ubuntu), or put both binaries on PATH" >&2
exit 1
