#!/usr/bin/env bash
# contrib/quickstart.sh [BUILD_DIR] — the README's quick start on the
# embedded default: mount sandboxfs --local in a temporary directory, create
# a sandbox with mkdir, run a command through its ctl file, show the result
# files, unmount. Everything it starts is stopped and unmounted on exit.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
sandboxfs=$build/fuse/sandboxfs
[ -x "$sandboxfs" ] || { echo "quickstart: $sandboxfs not built" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandboxfs-quickstart.XXXXXX")
M=$tmp/mnt
mkdir "$M"
"$sandboxfs" -f --local -o "state=$tmp/state" "$M" >"$tmp/sandboxfs.log" 2>&1 &
pid=$!

cleanup() {
	if mountpoint -q "$M"; then
		fusermount3 -u "$M" 2>/dev/null || true
	fi
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		sleep 1
	fi
	if mountpoint -q "$M"; then
		fusermount3 -u -z "$M" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

for _ in $(seq 200); do
	mountpoint -q "$M" && break
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "quickstart: sandboxfs exited:" >&2
		cat "$tmp/sandboxfs.log" >&2
		exit 1
	fi
	sleep 0.05
done
mountpoint -q "$M" || { echo "quickstart: the mount did not appear" >&2; exit 1; }

show() {
	echo "\$ $*"
	eval "$@"
}
cd "$tmp"
M=mnt
show "mkdir $M/demo && echo 'uname -a' > $M/demo/ctl && cat $M/demo/stdout"
show "ls $M/demo"
show "cat $M/demo/exit $M/demo/status"
show "echo 'echo hello > hello.txt; exit 3' > $M/demo/ctl; cat $M/demo/exit $M/demo/workspace/hello.txt"
show "ls $M/demo/runs"
show "cat $M/.sandboxfs/health"
show "fusermount3 -u $M"
sleep 0.5
echo "quickstart: ok"
