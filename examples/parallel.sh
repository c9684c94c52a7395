#!/bin/sh
# parallel.sh — create N sandboxes in parallel (default 10), run a command
# in each at the same time, and collect their results into one table.
#
#   mkdir -p ~/sbx && sandboxfs --local ~/sbx
#   examples/parallel.sh ~/sbx 10
#   fusermount3 -u ~/sbx
#
# Each sandbox has its own seat, so the commands really run in parallel;
# the sandboxes are torn down at the end (rmdir).
set -eu
M=${1:?usage: parallel.sh MOUNTPOINT [N]}
N=${2:-10}
prefix=par-$$
results=$(mktemp -d)
ids=""
cleanup() {
	for id in $ids; do rmdir "$M/$id" 2>/dev/null || true; done
	rm -rf "$results"
}
trap cleanup EXIT

i=1
while [ "$i" -le "$N" ]; do
	ids="$ids $prefix-$i"
	i=$((i + 1))
done

# 1. create them all at once
for id in $ids; do mkdir "$M/$id" & done
wait
for id in $ids; do [ -d "$M/$id" ] || { echo "parallel: $id was not created" >&2; exit 1; }; done

# 2. run one command in each, in parallel: each job writes its sandbox's
#    ctl, then copies exit and stdout out
for id in $ids; do
	(
		n=${id##*-}
		echo "sleep 1; echo \$(( $n * $n )); exit \$(( $n % 3 == 0 ))" > "$M/$id/ctl"
		printf '%s %s %s\n' "$id" "$(cat "$M/$id/exit")" "$(cat "$M/$id/stdout")" \
			> "$results/$id"
	) &
done
wait

# 3. collect
printf '%-16s %4s  %s\n' SANDBOX EXIT STDOUT
failed=0
for id in $ids; do
	read -r name code out < "$results/$id"
	printf '%-16s %4s  %s\n' "$name" "$code" "$out"
	[ "$code" = 0 ] || failed=$((failed + 1))
done
echo "$N sandboxes, $failed commands failed"
