#!/bin/bash
# test-docker.sh: make a Docker engine and the test image local/busybox:ci
# ready for the container tests, idempotently (see shared/recipes:
# container-runtime.sh). No registry is needed: the image is imported from
# Debian's static busybox.
#
# Without root nothing can be installed or started: the script says so and
# exits 0, and the tests that need Docker skip with the same message.
set -euo pipefail

IMAGE=${BERTH_TEST_IMAGE:-local/busybox:ci}
LOG=${BERTH_DOCKERD_LOG:-/tmp/berth-dockerd.log}

engine_up() { docker version >/dev/null 2>&1; }

if engine_up && docker image inspect "$IMAGE" >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "test-docker: not root: cannot install or start dockerd; the container tests will skip" >&2
	exit 0
fi

# Several worktrees may run this at once: one at a time.
exec 9>/tmp/berth-test-docker.lock
flock 9

need=""
command -v dockerd >/dev/null || need="$need docker.io"
[ -x /bin/busybox ] || need="$need busybox-static"
if [ -n "$need" ]; then
	echo "test-docker: installing:$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq $need >/dev/null
fi

if ! engine_up; then
	echo "test-docker: starting dockerd (log: $LOG)"
	# setsid: the engine outlives the make or test that started it.
	setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
	for _ in $(seq 1 240); do
		engine_up && break
		sleep 0.25
	done
	if ! engine_up; then
		echo "test-docker: dockerd did not come up; last lines of $LOG:" >&2
		tail -n 20 "$LOG" >&2 || true
		exit 1
	fi
fi

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	echo "test-docker: importing $IMAGE from /bin/busybox"
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	mkdir -p "$root/bin" "$root/tmp" "$root/etc"
	cp /bin/busybox "$root/bin/busybox"
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
	tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' - "$IMAGE" >/dev/null
fi
docker version --format 'test-docker: engine {{.Server.Version}}, API {{.Server.APIVersion}}'
