#!/bin/bash
# test-prometheus.sh: install Debian's prometheus package for the test in
# which a real Prometheus scrapes the server (internal/server/
# prom_real_test.go), idempotently. The test starts its own Prometheus on a
# free port with a configuration it writes; nothing is started here.
#
# Without root nothing can be installed: the script says so and exits 0,
# and the test skips with the same message.
set -euo pipefail

command -v prometheus >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "test-prometheus: not root: cannot install prometheus; the real-Prometheus test will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-prometheus.lock
flock 9
command -v prometheus >/dev/null && exit 0

echo "test-prometheus: installing prometheus"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
# No recommends: the node exporter is not needed.
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends prometheus >/dev/null
# The package's own service, where an init system started it, is not the
# tests': it would hold port 9090 for nothing.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
prometheus --version 2>&1 | head -n 1 | sed 's/^/test-prometheus: /'
