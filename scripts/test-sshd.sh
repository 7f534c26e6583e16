#!/bin/bash
# test-sshd.sh: install Debian's openssh-server for the SSH fleet test
# (cmd/berth: fleet_netns_test.go), idempotently. The test starts its own
# sshd in each network namespace it makes, with its own host key, config
# and authorized_keys, and stops them after; nothing is started here, and
# the package's own service, where an init system started one, is
# stopped and disabled.
#
# Without root nothing can be installed: the script says so and exits 0,
# and the test skips.
set -euo pipefail

have() { [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null; }

have && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "test-sshd: not root: cannot install openssh-server; the SSH fleet test will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-sshd.lock
flock 9
have && exit 0

echo "test-sshd: installing openssh-server"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
if command -v systemctl >/dev/null && systemctl is-active --quiet ssh 2>/dev/null; then
	systemctl disable --now ssh >/dev/null 2>&1 || true
fi
