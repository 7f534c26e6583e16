#!/bin/bash
# test-postgres.sh: install Debian's postgresql package for the tests that
# run the store and the server on PostgreSQL (internal/store/pgtest),
# idempotently. The tests start their own throwaway cluster (initdb +
# pg_ctl in a temporary directory, on a free port, as the postgres user)
# and remove it after; nothing is started here, and the package's own
# cluster service, where an init system started one, is stopped.
#
# Without root nothing can be installed: the script says so and exits 0,
# and the tests on PostgreSQL skip with the same message.
set -euo pipefail

have() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }

have && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "test-postgres: not root: cannot install postgresql; the tests on PostgreSQL will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-postgres.lock
flock 9
have && exit 0

echo "test-postgres: installing postgresql"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends postgresql >/dev/null
# The package's cluster (port 5432), where a service manager started it,
# is not the tests': they start their own.
if command -v systemctl >/dev/null && systemctl is-active --quiet postgresql 2>/dev/null; then
	systemctl disable --now postgresql >/dev/null 2>&1 || true
fi
# Without one, the package's scripts may have started it themselves.
if command -v pg_lsclusters >/dev/null; then
	pg_lsclusters -h | awk '$4 == "online" { print $1, $2 }' | while read -r v c; do
		pg_ctlcluster "$v" "$c" stop || true
	done
fi
ls -d /usr/lib/postgresql/*/bin | sed 's/^/test-postgres: /'
