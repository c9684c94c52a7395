#!/usr/bin/env bash
# setup.sh — one entry point for a fresh Debian 12 machine (run as root, or
# with sudo available for the package step).
#
#   ./setup.sh run    install what is missing, build, and run the main job
#                     on the embedded default
#   ./setup.sh test   install what is missing, build, and run every test
#   ./setup.sh deps   only install the packages
#   ./setup.sh build  only build (into ./build)
#
# Environment: BUILD_DIR (default build), SANITIZE=1 for an
# AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan.
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the build, the tests and the examples need.
PACKAGES=(
	build-essential meson ninja-build pkg-config
	libfuse3-dev fuse3 libcurl4-openssl-dev libcjson-dev libmicrohttpd-dev
	zlib1g-dev libisal-dev libattr1-dev attr
	python3 python3-pytest curl procps psmisc
	# the libFuzzer harnesses (tests/run-fuzz)
	clang libclang-rt-14-dev
	# the installation tests: man pages, shell completion
	man-db groff-base bash-completion
	# the installation tests check the user unit with systemd-analyze
	systemd
	# examples/edit.sh scripts ed (and vim, below)
	ed
	# the workspace's mounted tests run real programs through the mount
	vim git rsync fio tar make
	# a sandbox with BusyBox's tools only (tests/mount/test_busybox.py)
	busybox
	# the reliability tests: a TLS peer, another user, a leak check
	openssl util-linux valgrind
)

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null; then echo sudo; else
			echo "setup.sh: installing packages needs root; run as root or install sudo" >&2
			exit 1
		fi
	fi
}

deps() {
	local missing=()
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local s
	s=$(need_root)
	echo "setup.sh: installing ${missing[*]}"
	$s env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$s env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
	local dir=${BUILD_DIR:-build}
	local extra=()
	if [ "${SANITIZE:-0}" = 1 ]; then
		dir=${BUILD_DIR:-build-asan}
		extra+=(-Db_sanitize=address,undefined -Db_lundef=false)
	fi
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" --werror "${extra[@]}" >&2 || return 1
	fi
	# Progress goes to stderr: stdout carries only the build directory.
	ninja -C "$dir" >&2 || return 1
	echo "$dir"
}

case "${1:-}" in
deps) deps ;;
build) deps; build ;;
run)
	deps
	dir=$(build)
	exec contrib/quickstart.sh "$dir"
	;;
test)
	deps
	dir=$(build)
	shift
	exec tests/run-all "$dir" "$@"
	;;
*)
	sed -n '2,14p' "$0"
	exit 2
	;;
esac
