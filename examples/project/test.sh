#!/bin/sh
# The project's tests: run by `make test`.
fail=0
check() {
	got=$(sh wc.sh "$2")
	if [ "$got" = "$1" ]; then echo "ok   $2: $got"; else echo "FAIL $2: $got, want $1"; fail=1; fi
}
printf 'one two three\n' > t1.txt
printf '' > t2.txt
printf 'a\nb c\n\n d\n' > t3.txt
check 3 t1.txt
check 0 t2.txt
check 4 t3.txt
exit $fail
