#!/usr/bin/env python3
"""drive.py — drive a sandbox from Python with nothing but open():
create it through .sandboxfs/ctl, write a program into its workspace, run
it through ctl, and read its exit code, stdout and status back.

    mkdir -p ~/sbx && sandboxfs --local ~/sbx
    python3 examples/drive.py ~/sbx
    fusermount3 -u ~/sbx

No SDK, no HTTP client: every step is a file. A failing program is a
result (exit, status), not an exception; an OSError from the ctl write is
the machinery (EBUSY: a command already runs there; ENOTCONN: nothing was
sent; EIO: the outcome is unknown and the command is never resent).
"""
import sys

mount = sys.argv[1] if len(sys.argv) > 1 else sys.exit("usage: drive.py MOUNTPOINT [ID]")
sid = sys.argv[2] if len(sys.argv) > 2 else "pydrive"
sbx = f"{mount}/{sid}"


def read(name):
    with open(f"{sbx}/{name}") as f:
        return f.read()


def run(command):
    """Runs command in the sandbox; returns (exit code, stdout, stderr)."""
    # ctl is opened anew for each command, and one write is one command.
    # After a write that failed with EIO (outcome unknown) sandboxfs refuses
    # every later write on that descriptor: Python writes the bytes it kept
    # again at close(), and a command must never run twice.
    with open(f"{sbx}/ctl", "w") as ctl:
        ctl.write(command)
    code = read("exit").strip()
    return (int(code) if code else None), read("stdout"), read("stderr")


# create the sandbox (same as mkdir; an existing one is an error, EEXIST)
try:
    with open(f"{mount}/.sandboxfs/ctl", "w") as ctl:
        ctl.write(f"create {sid}")
except FileExistsError:
    pass
print("state:", read("state").strip())

with open(f"{sbx}/workspace/primes.py", "w") as f:
    f.write("import sys\n"
            "n = int(sys.argv[1])\n"
            "ps = [p for p in range(2, n) if all(p % d for d in range(2, p))]\n"
            "print(' '.join(map(str, ps)))\n"
            "sys.exit(0 if ps else 3)\n")

code, out, _ = run("python3 primes.py 30")
print(f"exit {code}: {out.strip()}")
assert code == 0 and out.split() == ["2", "3", "5", "7", "11", "13", "17", "19", "23", "29"]

code, out, err = run("python3 primes.py 2")
print(f"exit {code}, status {read('status').strip()}")
assert code == 3 and read("status") == "exited\n"

code, out, err = run("python3 -c 'import sys; sys.exit(\"boom\")'")
print(f"exit {code}, stderr {err.strip()!r}")
assert code == 1 and "boom" in err

# every command this mount ran is kept in runs/SEQ/
last = read("last").strip()
with open(f"{sbx}/runs/{last}/command") as f:
    print(f"run {last} was: {f.read().strip()}")
print("ok")
