#!/usr/bin/env bash
# test_sandboxctl.sh SANDBOXCTL SANDBOX_SERVER — the sandboxctl verbs, their
# exit codes, and that nothing it prints names a URL, a port or the token.
set -uo pipefail
ctl=$1
server=$2
tmp=$(mktemp -d /tmp/sandboxctl-test-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
checks=0
all="$tmp/all-output"
: >"$all"

expect() { # expect RC DESCRIPTION -- CMD...
	local want=$1 what=$2
	shift 3
	local got
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	cat "$tmp/out" "$tmp/err" >>"$all"
	checks=$((checks + 1))
	if [ "$got" != "$want" ]; then
		echo "FAIL: $what: exit $got, want $want" >&2
		sed 's/^/  stderr: /' "$tmp/err" >&2
		fail=$((fail + 1))
	fi
}
check() { # check DESCRIPTION CONDITION...
	local what=$1
	shift
	checks=$((checks + 1))
	if ! "$@"; then
		echo "FAIL: $what" >&2
		fail=$((fail + 1))
	fi
}
start() { # start DIR ARGS... ; sets port
	mkdir -p "$1"
	local dir=$1
	shift
	"$server" --port 0 --port-file "$dir/port" --faults "$@" >/dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 500); do [ -s "$dir/port" ] && break; sleep 0.01; done
	port=$(cat "$dir/port")
}

# --- a sandbox ------------------------------------------------------------
start "$tmp/s" --workspace "$tmp/s"
sport=$port
export SANDBOX_URL=http://127.0.0.1:$sport
echo "$SANDBOX_URL" >"$tmp/urlfile"

expect 0 "--help" -- "$ctl" --help
expect 2 "no verb" -- "$ctl"
expect 2 "unknown verb" -- "$ctl" frobnicate
expect 0 "health" -- "$ctl" health
check "health prints ok" grep -qx ok "$tmp/out"
expect 7 "exec passes the exit code" -- "$ctl" exec 'echo out; echo err >&2; exit 7'
check "exec stdout" grep -qx out "$tmp/out"
check "exec stderr" grep -qx err "$tmp/err"
expect 124 "exec timeout" -- "$ctl" exec 'sleep 3' --timeout 1
printf 'hello\n' >"$tmp/in"
expect 0 "put from a file" -- "$ctl" --url-file "$tmp/urlfile" put 'd i r/f #?%.txt' "$tmp/in"
expect 0 "put from a pipe" -- bash -c "printf piped | '$ctl' put 'd i r/piped'"
expect 0 "ls" -- "$ctl" ls 'd i r'
check "ls shows the names" grep -q 'f #?%.txt' "$tmp/out"
check "ls shows the size" grep -q '^- *6 f #?%.txt$' "$tmp/out"
expect 0 "get to a file" -- "$ctl" get 'd i r/f #?%.txt' "$tmp/got"
check "get content" cmp -s "$tmp/in" "$tmp/got"
expect 0 "get to stdout" -- "$ctl" get 'd i r/piped'
check "get stdout" test "$(cat "$tmp/out")" = piped
expect 3 "get missing" -- "$ctl" get 'no such'
check "get missing leaves no file" test ! -e "$tmp/nothing"
expect 3 "get missing to a file" -- "$ctl" get 'no such' "$tmp/nothing"
check "no partial output file" test -z "$(ls "$tmp" | grep nothing)"
expect 2 "invalid path" -- "$ctl" get '../etc/passwd'
expect 0 "rm a tree" -- "$ctl" rm 'd i r'
expect 3 "rm again" -- "$ctl" rm 'd i r'
expect 0 "bench-exec" -- "$ctl" bench-exec 20
check "bench-exec reuses one connection" grep -q 'connections=1$' "$tmp/out"
expect 0 "bench-put" -- "$ctl" bench-put 50 4096
check "bench-put reuses one connection" grep -q 'connections=1$' "$tmp/out"
expect 0 "bench-get" -- "$ctl" bench-get 50 65536
check "bench-get reuses one connection" grep -q 'connections=1$' "$tmp/out"
curl -s -X POST -H 'Content-Type: application/json' \
	-d '{"lose_answer":true,"routes":"execute"}' "$SANDBOX_URL/_admin/faults" >/dev/null
expect 125 "exec with the answer lost" -- "$ctl" exec 'echo x'
check "answer lost is said" grep -q 'answer lost' "$tmp/err"
curl -s -X POST -d '{}' -H 'Content-Type: application/json' "$SANDBOX_URL/_admin/faults" >/dev/null
expect 2 "no URL" -- env -u SANDBOX_URL "$ctl" health
expect 2 "a URL that is not http" -- env SANDBOX_URL=ftp://x "$ctl" health

# Nothing listens there any more: not sent.
start "$tmp/dead" --workspace "$tmp/dead"
deadport=$port
kill "${pids[-1]}"
wait "${pids[-1]}" 2>/dev/null
expect 4 "not sent" -- env SANDBOX_URL=http://127.0.0.1:$deadport "$ctl" ls
expect 125 "exec not sent" -- env SANDBOX_URL=http://127.0.0.1:$deadport "$ctl" exec true
check "not sent is said" grep -q 'not sent' "$tmp/err"

# --- an orchestrator ------------------------------------------------------
token=tok-$RANDOM$RANDOM$RANDOM
printf '%s\n' "$token" >"$tmp/token"
chmod 600 "$tmp/token"
start "$tmp/o" --orchestrator --root "$tmp/o/root" --token-file "$tmp/token"
oport=$port
export SANDBOXFS_ORCHESTRATOR=http://127.0.0.1:$oport
expect 0 "create" -- "$ctl" --token-file "$tmp/token" create box1 --save-url "$tmp/box1.url"
check "create prints id and state" grep -Eq '^box1 (ready|creating)$' "$tmp/out"
check "the URL file is 0600" test "$(stat -c %a "$tmp/box1.url")" = 600
expect 0 "exec through the saved URL" -- env -u SANDBOX_URL "$ctl" --url-file "$tmp/box1.url" exec 'echo inside'
check "exec inside" grep -qx inside "$tmp/out"
expect 6 "create again" -- "$ctl" --token-file "$tmp/token" create box1
expect 0 "list (token from env)" -- env SANDBOXFS_TOKEN="$token" "$ctl" list
check "list shows box1" grep -q '^box1 ' "$tmp/out"
expect 0 "info" -- "$ctl" --token-file "$tmp/token" info box1
check "info hides the URL" grep -q '^url: (set' "$tmp/out"
expect 7 "wrong token" -- env SANDBOXFS_TOKEN=nope "$ctl" list
expect 7 "no token" -- env -u SANDBOXFS_TOKEN "$ctl" list
expect 0 "delete" -- "$ctl" --token-file "$tmp/token" delete box1
expect 3 "delete again" -- "$ctl" --token-file "$tmp/token" delete box1
expect 3 "info gone" -- "$ctl" --token-file "$tmp/token" info box1
expect 2 "bad id" -- "$ctl" --token-file "$tmp/token" create 'Bad_Id'
# A create spec, and the request bound over it.
expect 0 "create with a spec" -- "$ctl" --token-file "$tmp/token" create specbox \
	--spec '{"environment":{"SPEC_VAR":"from-spec"},"timeoutSeconds":5}' \
	--request-timeout 120 --idle 600 --save-url "$tmp/specbox.url"
check "the spec's environment is set" \
	sh -c '"$1" --url-file "$2" exec "echo \$SPEC_VAR" | grep -qx from-spec' _ "$ctl" "$tmp/specbox.url"
check "the request bound wins" grep -Eq '"timeoutSeconds":[[:space:]]*120,?$' "$tmp/o/root/specbox/sandbox.json"
expect 0 "create from a spec's pool" -- "$ctl" --token-file "$tmp/token" create specpool \
	--spec '{"pool":"default"}'
expect 1 "a spec's unknown field" -- "$ctl" --token-file "$tmp/token" create specbad \
	--spec '{"gpuCount":1}'
check "the orchestrator names the field" grep -q 'gpuCount' "$tmp/err"
expect 2 "a spec that is not an object" -- "$ctl" --token-file "$tmp/token" create specbad \
	--spec '[1]'
expect 2 "a request bound out of range" -- "$ctl" --token-file "$tmp/token" create specbad \
	--request-timeout 3601
expect 0 "delete the spec's sandboxes" -- "$ctl" --token-file "$tmp/token" delete specbox
expect 0 "delete the spec pool's sandbox" -- "$ctl" --token-file "$tmp/token" delete specpool
# Pools.
expect 0 "pools" -- "$ctl" --token-file "$tmp/token" pools
check "pools lists default" grep -Eq '^default local [0-9]+ [0-9]+ [0-9]+$' "$tmp/out"
expect 0 "one pool" -- "$ctl" --token-file "$tmp/token" pools default
check "one pool, one line" test "$(wc -l <"$tmp/out")" -eq 1
expect 3 "an unknown pool" -- "$ctl" --token-file "$tmp/token" pools no-such-pool
expect 2 "pools takes one id" -- "$ctl" --token-file "$tmp/token" pools a b

# --- an orchestrator and its sandboxes on Unix sockets --------------------
mkdir -p "$tmp/u"
"$server" --orchestrator --root "$tmp/u/root" --token-file "$tmp/token" \
	--unix "$tmp/u/run/orch" --url-file "$tmp/u/url" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 500); do [ -s "$tmp/u/url" ] && break; sleep 0.01; done
check "the orchestrator's URL is a Unix one" grep -q '^http+unix://' "$tmp/u/url"
expect 0 "create over a socket" -- env SANDBOXFS_ORCHESTRATOR="$(cat "$tmp/u/url")" \
	"$ctl" --token-file "$tmp/token" create ubox --save-url "$tmp/ubox.url"
check "a sandbox URL on a socket" grep -q '^http+unix://' "$tmp/ubox.url"
expect 0 "exec over a socket" -- env -u SANDBOX_URL "$ctl" --url-file "$tmp/ubox.url" exec 'echo unix'
check "exec over a socket prints" grep -qx unix "$tmp/out"
expect 0 "put over a socket" -- env -u SANDBOX_URL "$ctl" --url-file "$tmp/ubox.url" put u.txt "$tmp/in"
expect 0 "ls over a socket" -- env -u SANDBOX_URL "$ctl" --url-file "$tmp/ubox.url" ls
check "ls over a socket shows the file" grep -q ' u.txt$' "$tmp/out"
expect 0 "delete over a socket" -- env SANDBOXFS_ORCHESTRATOR="$(cat "$tmp/u/url")" \
	"$ctl" --token-file "$tmp/token" delete ubox
expect 4 "its socket is gone: not sent" -- env -u SANDBOX_URL "$ctl" --url-file "$tmp/ubox.url" health
expect 2 "a relative socket path" -- env SANDBOX_URL='http+unix://run%2Fx' "$ctl" health

# --- secrets never printed --------------------------------------------------
for secret in "127.0.0.1" ":$sport" ":$oport" ":$deadport" "$token" "$(cat "$tmp/box1.url" | sed 's,.*:,:,')" \
	"$tmp/u/run" "$(cat "$tmp/ubox.url")" "%2Frun%2F"; do
	checks=$((checks + 1))
	if grep -qF -- "$secret" "$all"; then
		echo "FAIL: a secret was printed: pattern #$checks" >&2
		fail=$((fail + 1))
	fi
done

echo "test_sandboxctl: $checks checks, $fail failed"
[ "$fail" -eq 0 ]
