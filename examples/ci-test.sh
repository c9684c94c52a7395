#!/bin/sh
# ci-test.sh — run a project's tests in a fresh sandbox, as a CI job would:
# create a sandbox, copy the project into its workspace with tar, run the
# test command there, print its output and exit with its exit code; the
# sandbox is torn down at the end whatever happened.
#
#   mkdir -p ~/sbx && sandboxfs --local ~/sbx   # or -o orchestrator=URL,...
#   examples/ci-test.sh ~/sbx examples/project 'make test'
#   fusermount3 -u ~/sbx
#
# In a CI job, mount once before the steps and run one sandbox per job;
# the sandbox's id is the job's (CI_JOB_ID, GITHUB_RUN_ID) when there is one.
set -eu
M=${1:?usage: ci-test.sh MOUNTPOINT PROJECT_DIR [COMMAND]}
project=${2:?usage: ci-test.sh MOUNTPOINT PROJECT_DIR [COMMAND]}
command=${3:-make test}
id=ci-${CI_JOB_ID:-${GITHUB_RUN_ID:-$$}}
S=$M/$id

mkdir "$S"                               # a fresh sandbox; EEXIST if reused
trap 'rmdir "$S" 2>/dev/null || echo "ci-test: could not remove sandbox $id" >&2' EXIT
echo "ci-test: sandbox $id is $(cat "$S/state")"

# Copy the tree (tar, not cp -a: the workspace keeps no modes or owners).
tar -C "$project" --exclude=.git -cf - . | tar -C "$S/workspace" --no-same-owner -xf -

echo 600 > "$S/timeout"                  # the test run may take 10 minutes
echo "ci-test: running '$command'"
echo "$command" > "$S/ctl"
cat "$S/stdout"
cat "$S/stderr" >&2
status=$(cat "$S/status")
code=$(cat "$S/exit")
echo "ci-test: $status, exit $code"
[ "$status" = exited ] || exit 1         # timeout, unknown, failed
exit "$code"
