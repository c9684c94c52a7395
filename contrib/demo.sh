#!/usr/bin/env bash
# contrib/demo.sh BUILD_DIR — the main job of `./setup.sh run` until the
# filesystem exists: start the local orchestrator with a random token on a
# Unix socket (as sandboxfs --local does: no TCP port), create a sandbox
# `demo` through its API, run `uname -a` in it, show the output, delete the
# sandbox and stop the orchestrator.
#
# The token and the sandbox URL are secrets: they live only in mode 0600
# files of a private temp dir and reach curl through a config file (-K), so
# they are never printed nor visible in the process list. URLs are
# http+unix://ENCODED_SOCKET_PATH/BASE; curl takes the socket apart.
set -euo pipefail
build=${1:?usage: contrib/demo.sh BUILD_DIR}
server="$build/server/sandbox-server"
[ -x "$server" ] || { echo "demo: $server not built" >&2; exit 1; }

umask 077
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandboxfs-demo.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
"$server" --orchestrator --root "$tmp/root" --token-file "$tmp/token" \
	--unix "$tmp/run/orch" --url-file "$tmp/url" >"$tmp/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[ -s "$tmp/url" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
	sleep 0.05
done
[ -s "$tmp/url" ] || { echo "demo: the orchestrator did not start" >&2; exit 1; }
orch=$(cat "$tmp/url")

# unix_part WHICH URL: the socket path (WHICH=socket) or the path after it
# (WHICH=path) of an http+unix:// URL.
unix_part() {
	/usr/bin/python3 -c 'import sys, urllib.parse as u
p = u.urlsplit(sys.argv[2])
print(u.unquote(p.netloc) if sys.argv[1] == "socket" else p.path)' "$1" "$2"
}

# api METHOD URL [BODY_FILE]: one request, answer body on stdout; fails
# on an HTTP error status.
api() {
	{
		printf 'unix-socket = "%s"\n' "$(unix_part socket "$2")"
		printf 'url = "http://localhost%s"\n' "$(unix_part path "$2")"
		printf 'request = "%s"\n' "$1"
		printf 'header = "Authorization: Bearer %s"\n' "$(cat "$tmp/token")"
		if [ -n "${3:-}" ]; then
			printf 'header = "Content-Type: application/json"\n'
			printf 'data-binary = "@%s"\n' "$3"
		fi
	} >"$tmp/curl.cfg"
	curl -sS --fail-with-body --max-time 120 -K "$tmp/curl.cfg"
}
json_field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

echo "demo: local orchestrator started (pid $pid)"
echo '{"pool": "default", "id": "demo"}' >"$tmp/create.json"
api POST "$orch/v1/sandbox" "$tmp/create.json" >"$tmp/status.json"
echo "demo: created sandbox '$(json_field id <"$tmp/status.json")'," \
	"status $(json_field status <"$tmp/status.json")"
json_field url <"$tmp/status.json" >"$tmp/url"

echo '{"command": "uname -a", "timeoutSeconds": 30}' >"$tmp/exec.json"
api POST "$(cat "$tmp/url")/execute" "$tmp/exec.json" >"$tmp/result.json"
echo "demo: \$ uname -a   (exit code $(json_field exitCode <"$tmp/result.json"))"
json_field stdout <"$tmp/result.json" | sed '/^$/d'

api DELETE "$orch/v1/sandbox/demo" >/dev/null
echo "demo: deleted sandbox 'demo'"
