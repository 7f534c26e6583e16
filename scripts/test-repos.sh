#!/bin/bash
# test-repos.sh: what the tests of code and files travelling with a run use
# (issue 16), from Debian, idempotently: git (berth apply packs a Git work
# tree; the tests make repositories), tar (a node unpacks another user's
# archive with it), e2fsprogs (mkfs.ext4: a job's resources.disk is an ext4
# image, loop-mounted) and python3 (the migration guide's example runs
# `python3 train.py`).
#
# Without root nothing can be installed: the script says so and exits 0,
# and the tests that need what is missing skip, saying why.
set -euo pipefail

missing=()
command -v git >/dev/null || missing+=(git)
command -v tar >/dev/null || missing+=(tar)
command -v mkfs.ext4 >/dev/null || [ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || missing+=(e2fsprogs)
command -v python3 >/dev/null || missing+=(python3)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "test-repos: not root: cannot install ${missing[*]}; the tests needing them will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-repos.lock
flock 9
echo "test-repos: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
