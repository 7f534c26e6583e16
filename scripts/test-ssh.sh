#!/bin/bash
# test-ssh.sh: install Debian's OpenSSH client (ssh) for the end-to-end
# test that reaches a dev environment with it (cmd/berth/
# interact_e2e_test.go), idempotently. No sshd is started: the SSH server
# is Berth's own (berth ssh-host).
#
# Without root nothing can be installed: the script says so and exits 0,
# and the test skips.
set -euo pipefail

command -v ssh >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "test-ssh: not root: cannot install openssh-client; the dev environment SSH test will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-ssh.lock
flock 9
command -v ssh >/dev/null && exit 0

echo "test-ssh: installing openssh-client"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends openssh-client >/dev/null
ssh -V 2>&1 | sed 's/^/test-ssh: /'
