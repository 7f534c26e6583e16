#!/bin/bash
# test-chromium.sh: install Debian's chromium for the dashboard's browser
# tests (internal/web/browser_test.go), idempotently. The tests start their
# own headless chromium through chromedp; nothing is started here.
#
# Without root nothing can be installed: the script says so and exits 0,
# and the tests skip with the same message.
set -euo pipefail

command -v chromium >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "test-chromium: not root: cannot install chromium; the browser tests will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-chromium.lock
flock 9
command -v chromium >/dev/null && exit 0

echo "test-chromium: installing chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
chromium --version 2>&1 | head -n 1 | sed 's/^/test-chromium: /'
