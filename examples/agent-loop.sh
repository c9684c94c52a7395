#!/bin/sh
# agent-loop.sh — an agent loop in plain shell: write code into a sandbox's
# workspace/, run it through ctl, read exit and stdout, and retry with the
# next attempt until the output is right.
#
# Run it on a mounted sandboxfs (any orchestrator, or the embedded default):
#
#   mkdir -p ~/sbx && sandboxfs --local ~/sbx
#   examples/agent-loop.sh ~/sbx            # sandbox "agent" is created
#   fusermount3 -u ~/sbx
#
# The "model" here is a list of three attempts (a wrong answer, a syntax
# error, a right one); a real agent would ask a model for the next one,
# showing it the previous stdout, stderr and exit code.
set -eu
M=${1:?usage: agent-loop.sh MOUNTPOINT [SANDBOX_ID]}
S=$M/${2:-agent}
want=5050

[ -d "$S" ] || mkdir "$S"           # mkdir creates the sandbox

attempt() {                          # the code the "model" writes, try $1
	case $1 in
	1) printf 'i=1; s=0\nwhile [ $i -lt 100 ]; do s=$((s + i)); i=$((i + 1)); done\necho $s\n' ;;
	2) printf 'i=1; s=0\nwhile [ $i -le 100 ]; do s=$((s + i)); i=$((i + 1))\necho $s\n' ;;
	3) printf 'i=1; s=0\nwhile [ $i -le 100 ]; do s=$((s + i)); i=$((i + 1)); done\necho $s\n' ;;
	*) return 1 ;;
	esac
}

try=1
while code=$(attempt $try); do
	printf '%s\n' "$code" > "$S/workspace/sum.sh"       # upload on close
	# One write is one command; it returns when the command has finished.
	# A write that fails is the machinery, not the program: EIO means the
	# outcome is unknown (status says "unknown") and nothing is resent, so
	# an agent must look at the workspace before deciding to run it again.
	# Each "> ctl" opens ctl anew: a descriptor whose write ended with an
	# unknown outcome takes no more commands.
	if ! echo 'sh sum.sh' > "$S/ctl"; then
		echo "attempt $try: the command could not be run ($(cat "$S/status"))" >&2
		exit 2
	fi
	exit_code=$(cat "$S/exit")
	out=$(cat "$S/stdout")
	echo "attempt $try: exit $exit_code, stdout '$out'"
	if [ "$exit_code" = 0 ] && [ "$out" = "$want" ]; then
		echo "solved in $try attempts (run $(cat "$S/last"))"
		exit 0
	fi
	[ "$exit_code" = 0 ] || echo "  stderr: $(head -c 200 "$S/stderr")"
	try=$((try + 1))
done
echo "gave up after $((try - 1)) attempts" >&2
exit 1
