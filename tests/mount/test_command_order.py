"""Commands and uploads keep the user's order (DESIGN.md §2, §5): before a
command every pending upload of its sandbox is delivered, or the command is
refused at the ctl write and nothing reaches /execute; the retry thread
never uploads into a sandbox while a command holds its seat.

Results are checked through the sandbox contract (its files, its
/_admin/log and /_admin/stats), not only through the mount.
"""
import errno
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import executed, sandbox_url
import faultlib
import mount
import sbx

# What the daemon logs while uploads fail.
ALLOW = (r"upload failed", r"injected fault", r"server error", r"kept pending",
         r"uploads still pending")


def server_file(url, path):
    """The sandbox's copy of a file, read by a command (the /files routes
    may be faulted)."""
    r = sbx.execute(url, f"cat {path} 2>/dev/null || echo MISSING")
    assert r.status == 200, r.status
    return r.json()["stdout"]


def server_puts(url):
    return sbx.stats(url)["puts"]


def info(m, sid):
    return json.loads(mount.read(m.path(sid, "info")))


def test_pending_upload_blocks_the_next_command(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=30000"])
    with m:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        m.secrets.append(url)
        ws = m.path("sbx1", "workspace")
        os.listdir(ws)
        sbx.set_faults(url, error_rate=1.0, routes="files")
        werr, cerr = faultlib.write_file(ws / "f", b"v1\n")
        assert (werr, cerr) == (0, errno.EIO), (werr, cerr)

        # The command would overwrite f before v1 lands: refused, not sent.
        err, _ = faultlib.ctl(m.path("sbx1", "ctl"), "echo v2 > f")
        assert err == errno.EIO, faultlib.errname(err)
        sent = executed(orch, "sbx1")
        assert "echo v2 > f" not in sent, sent
        why = info(m, "sbx1")["last_error"]
        assert "f" in why and "upload" in why, why
        health = mount.read(m.path(".sandboxfs", "health"))
        assert "sbx1/workspace/f" in health, health
        assert mount.read(m.path("sbx1", "status")) == "failed\n"
        assert mount.read(m.path("sbx1", "exit")) == ""

        # PUTs work again: v1 lands by itself, then the command runs, and
        # v1 never comes back over v2.
        sbx.set_faults(url)
        assert sbx.wait_for(lambda: server_file(url, "f") == "v1\n", timeout=30)
        err, _ = faultlib.ctl(m.path("sbx1", "ctl"), "echo v2 > f")
        assert err == 0, faultlib.errname(err)
        now = server_file(url, "f")
        assert now == "v2\n", now
        time.sleep(2)  # a retry would come within this (base 200 ms)
        later = server_file(url, "f")
        assert later == "v2\n", later
        runs = executed(orch, "sbx1").count("echo v2 > f")
        assert runs == 1, runs
        assert sbx.wait_for(lambda: mount.read(m.path(".sandboxfs", "health")) == "ok\n",
                            timeout=10)
    m.check_log(allow=ALLOW + (r"not sent",))


def test_no_retry_while_a_command_runs(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=30000"])
    with m:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        m.secrets.append(url)
        ws = m.path("sbx1", "workspace")
        os.listdir(ws)
        result = {}
        t = threading.Thread(target=lambda: result.update(
            rc=faultlib.ctl(m.path("sbx1", "ctl"), "sleep 6")[0]))
        t.start()
        try:
            assert sbx.wait_for(
                lambda: mount.read(m.path("sbx1", "status")) == "running\n", timeout=10)
            # A file written during the command whose upload fails is pending.
            sbx.set_faults(url, error_rate=1.0, routes="files")
            werr, cerr = faultlib.write_file(ws / "g", b"during\n")
            assert (werr, cerr) == (0, errno.EIO), (werr, cerr)
            sbx.set_faults(url)
            puts = server_puts(url)
            time.sleep(2.5)  # retries come every 200 ms at first
            after = server_puts(url)
            assert after == puts, "an upload went in during the command"
            assert mount.read(m.path("sbx1", "status")) == "running\n"
        finally:
            t.join(30)
        assert result.get("rc") == 0, result
        # Once the seat is free the pending upload goes in.
        assert sbx.wait_for(lambda: server_file(url, "g") == "during\n", timeout=30)
    m.check_log(allow=ALLOW)


# The examples' pattern, run by the real CPython: its buffered writer keeps
# the bytes of a write that failed and writes them again at close().
DRIVE = r"""
import sys
try:
    with open(sys.argv[1], "w") as ctl:
        ctl.write(sys.argv[2])
    print("ok")
except OSError as e:
    print(e.errno)
"""


def test_client_library_retry_never_runs_a_command_twice(sandbox, orch):
    url = sandbox_url(orch, "sbx1")
    cmd = "echo once >> count.txt"
    sbx.set_faults(url, lose_answer=True, routes="execute")
    try:
        p = subprocess.run(["/usr/bin/python3", "-c", DRIVE, str(sandbox / "ctl"), cmd],
                           capture_output=True, text=True, timeout=60)
    finally:
        sbx.set_faults(url)
    assert p.stdout.split() == [str(errno.EIO)], (p.stdout, p.stderr)
    sent = executed(orch, "sbx1")
    assert sent.count(cmd) == 1, sent
    assert server_file(url, "count.txt") == "once\n"
    runs = sorted(os.listdir(sandbox / "runs"), key=int)
    assert [mount.read(sandbox / "runs" / r / "command") for r in runs] == [cmd + "\n"], runs
    assert mount.read(sandbox / "status") == "unknown\n"
    # A new descriptor takes commands again.
    err, _ = faultlib.ctl(sandbox / "ctl", "echo fresh")
    assert err == 0, faultlib.errname(err)
    assert mount.read(sandbox / "stdout") == "fresh\n"


def test_descriptor_refuses_commands_after_an_unknown_outcome(sandbox, orch):
    url = sandbox_url(orch, "sbx1")
    fd = os.open(sandbox / "ctl", os.O_WRONLY)
    try:
        assert os.write(fd, b"echo one\n") == 9
        sbx.set_faults(url, lose_answer=True, routes="execute")
        try:
            with pytest.raises(OSError) as e:
                os.write(fd, b"echo two\n")
            assert e.value.errno == errno.EIO
        finally:
            sbx.set_faults(url)
        # Nothing more goes through this descriptor, whatever it carries.
        for data in (b"echo two\n", b"echo three\n"):
            with pytest.raises(OSError) as e:
                os.write(fd, data)
            assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    sent = executed(orch, "sbx1")
    assert sent == ["echo one", "echo two"], sent


# A write interrupted by a signal returns EINTR while the command runs on;
# CPython writes the same bytes again after a handler that does not raise.
INTERRUPTED = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda *a: None)
signal.siginterrupt(signal.SIGUSR1, True)
fd = os.open(sys.argv[1], os.O_WRONLY)
cmd = sys.argv[2].encode()
print("start", flush=True)
n = libc.write(fd, cmd, len(cmd))
print(n, ctypes.get_errno(), flush=True)
sys.stdin.readline()  # the command has ended
n = libc.write(fd, cmd, len(cmd))
print(n, ctypes.get_errno(), flush=True)
"""


def test_descriptor_refuses_commands_after_an_interrupted_write(sandbox, orch):
    cmd = "sleep 2; echo ran >> count.txt"
    w = subprocess.Popen(["/usr/bin/python3", "-c", INTERRUPTED, str(sandbox / "ctl"), cmd],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline() == "start\n"
        assert sbx.wait_for(lambda: mount.read(sandbox / "status") == "running\n",
                            timeout=10)
        w.send_signal(signal.SIGUSR1)
        assert w.stdout.readline().split() == ["-1", str(errno.EINTR)]
        assert mount.read(sandbox / "exit") == "0\n"  # waits for the end
        w.stdin.write("\n")
        w.stdin.flush()
        assert w.stdout.readline().split() == ["-1", str(errno.EIO)]
    finally:
        w.kill()
        w.wait(10)
    sent = executed(orch, "sbx1")
    assert sent == [cmd], sent


# examples/drive.py's way of running a command, many times over.
DRIVE_MANY = r"""
import sys
ctl, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    try:
        with open(ctl, "w") as f:
            f.write(f"echo {i} >> ran.txt")
        print(i, "ok")
    except OSError as e:
        print(i, e.errno)
"""


def test_drive_pattern_with_random_500s_sends_each_command_once(sandbox, orch):
    url = sandbox_url(orch, "sbx1")
    n = 30
    sbx.set_faults(url, error_rate=0.3, routes="execute")
    try:
        p = subprocess.run(["/usr/bin/python3", "-c", DRIVE_MANY, str(sandbox / "ctl"),
                            str(n)], capture_output=True, text=True, timeout=120)
    finally:
        sbx.set_faults(url)
    outcomes = dict(line.split() for line in p.stdout.splitlines())
    assert len(outcomes) == n, (p.stdout, p.stderr)
    failed = [i for i, o in outcomes.items() if o != "ok"]
    assert failed, "no 500 in 30 commands: the fault did not apply"
    assert all(outcomes[i] == str(errno.EIO) for i in failed), outcomes
    # Each command went to the sandbox once, and the mount ran it once.
    commands = [mount.read(sandbox / "runs" / r / "command")
                for r in os.listdir(sandbox / "runs")]
    for i in range(n):
        assert commands.count(f"echo {i} >> ran.txt\n") == 1, (i, outcomes[str(i)])
    mstats = dict(line.split(" ", 1) for line in
                  mount.read(sandbox.parent / ".sandboxfs" / "stats").splitlines())
    assert int(mstats["requests_execute"]) == n, mstats["requests_execute"]
    ran = sbx.stats(url)["executes"]  # a 500 of the fault never ran
    assert ran == n - len(failed), (ran, len(failed))
