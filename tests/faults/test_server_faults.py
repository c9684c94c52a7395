"""Server faults through a real mount (DESIGN.md §2, §3, §4, §5).

Each test switches one fault of the local server on, does what a user
does (one ctl write, a file written and closed, ls, cat) and checks what
the user sees: the errno at the write or the close, status/exit/info, the
server's own record (/_admin/log, /_admin/stats: no command ever runs
twice), that nothing takes longer than its bound, and that data written
while the sandbox failed reaches it once it is healthy, without a remount.
"""
import errno
import json
import os
import subprocess
import time

import faultlib as fl
from faultlib import Timer, ctl, sandbox_url, write_file
import mount
import sbx

# What the daemon may log while a fault is on.
ALLOW = [r"upload failed", r"injected fault", r"server error", r"kept pending",
         r"uploads still pending", r"answer lost", r"not run", r"unknown",
         r"bad answer", r"malformed", r"listing", r"not sent", r"HTTP 5"]


def start(mounts, sid="sbx1", **mkw):
    m = mounts(**mkw)
    os.mkdir(m.path(sid))
    url = sandbox_url(mounts.orch, sid)
    m.secrets.append(url)
    os.listdir(m.path(sid, "workspace"))
    mounts.allow += ALLOW
    return m, m.path(sid), url


def info(d):
    return json.loads(mount.read(d / "info"))


def server_file(url, path):
    """A file's bytes on the sandbox (by GET), None when it does not exist."""
    r = sbx.get(url, path)
    assert r.status in (200, 404), r
    return r.body if r.status == 200 else None


def health(m):
    return mount.read(m.path(".sandboxfs", "health"))


# --- commands -------------------------------------------------------------

def test_lost_answer_after_execute_is_eio_unknown_and_never_resent(mounts):
    m, d, url = start(mounts)
    sbx.set_faults(url, lose_answer=True, routes="execute")
    err, secs = ctl(d / "ctl", "echo ran >> ran.txt")
    assert err == errno.EIO, fl.errname(err)
    assert secs < 20
    assert mount.read(d / "status") == "unknown\n"
    assert mount.read(d / "exit") == ""
    assert "unknown" in info(d)["why"]
    sbx.set_faults(url)
    time.sleep(1)  # a resend, if any, would have come by now
    assert fl.executed(mounts.orch, "sbx1") == ["echo ran >> ran.txt"]
    assert server_file(url, "ran.txt") == b"ran\n"  # it ran, exactly once
    assert ctl(d / "ctl", "true")[0] == 0
    assert fl.executed(mounts.orch, "sbx1") == ["echo ran >> ran.txt", "true"]


def test_drop_before_execute_is_eio_and_nothing_ran(mounts):
    m, d, url = start(mounts)
    sbx.set_faults(url, drop_before=True, routes="execute")
    err, secs = ctl(d / "ctl", "echo ran >> ran.txt")
    # The client cannot tell a drop from a loss: the outcome is unknown.
    assert err == errno.EIO, fl.errname(err)
    assert secs < 20
    assert mount.read(d / "status") in ("unknown\n", "failed\n")
    assert mount.read(d / "exit") == ""
    sbx.set_faults(url)
    time.sleep(1)
    assert fl.executed(mounts.orch, "sbx1") == []
    assert sbx.stats(url)["executes"] == 0
    assert server_file(url, "ran.txt") is None


def test_truncated_execute_answer_is_eio_unknown_once(mounts):
    m, d, url = start(mounts)
    sbx.set_faults(url, truncate_answer=True, routes="execute")
    err, secs = ctl(d / "ctl", "echo once >> once.txt; seq 1 2000")
    assert err == errno.EIO, fl.errname(err)
    assert secs < 20
    assert mount.read(d / "status") == "unknown\n"
    assert mount.read(d / "exit") == ""
    assert mount.read(d / "stdout") == ""  # half an answer is not shown
    sbx.set_faults(url)
    time.sleep(1)
    assert fl.executed(mounts.orch, "sbx1") == ["echo once >> once.txt; seq 1 2000"]
    assert server_file(url, "once.txt") == b"once\n"


def test_malformed_execute_answer_is_eio_unknown_once(mounts):
    m, d, url = start(mounts)
    sbx.set_faults(url, malformed_json=True, routes="execute")
    err, _ = ctl(d / "ctl", "echo hi")
    assert err == errno.EIO, fl.errname(err)
    assert mount.read(d / "status") == "unknown\n"
    assert mount.read(d / "exit") == ""
    sbx.set_faults(url)
    time.sleep(1)
    assert fl.executed(mounts.orch, "sbx1") == ["echo hi"]
    assert ctl(d / "ctl", "echo again")[0] == 0
    assert mount.read(d / "stdout") == "again\n"


def test_500s_at_20_percent_commands_and_files(mounts):
    """Every ctl write either ran once (write ok, exit set) or got EIO and
    did not run (the fault answers 500 without running it); every file
    reaches the sandbox, the failed closes by the retry."""
    m, d, url = start(mounts)
    sbx.set_faults(url, error_rate=0.2, routes="all")
    results = {}
    for i in range(40):
        err, secs = ctl(d / "ctl", f"echo {i} >> runs.txt")
        assert err in (0, errno.EIO), fl.errname(err)
        assert secs < 20
        results[i] = err
        if err == 0:
            assert mount.read(d / "status") == "exited\n"
            assert mount.read(d / "exit") == "0\n"
        else:
            assert mount.read(d / "status") in ("failed\n", "unknown\n")
            assert mount.read(d / "exit") == ""
    assert 0 < sum(1 for e in results.values() if e) < 40
    files = {}
    closes = {"ok": 0, "EIO": 0}
    for i in range(40):
        data = os.urandom(100 + i * 37)
        werr, cerr = write_file(d / "workspace" / f"f{i}.bin", data)
        if werr:  # the open may need a listing that got a 500
            assert werr == errno.EIO, fl.errname(werr)
            continue
        assert cerr in (0, errno.EIO), fl.errname(cerr)
        closes["EIO" if cerr else "ok"] += 1
        files[f"f{i}.bin"] = data
    assert len(files) >= 20
    sbx.set_faults(url)
    ran = [int(c.split()[1]) for c in fl.executed(mounts.orch, "sbx1")]
    assert len(ran) == len(set(ran)), "a command ran twice"
    assert sorted(ran) == sorted(i for i, e in results.items() if e == 0)
    assert server_file(url, "runs.txt") == "".join(f"{i}\n" for i in ran).encode()

    def delivered():
        return all(sbx.get(url, n).body == v for n, v in files.items())
    assert sbx.wait_for(delivered, timeout=60, interval=0.5), closes
    assert sbx.wait_for(lambda: health(m) == "ok\n", timeout=10), health(m)


def test_two_second_delays_are_slow_but_correct(mounts):
    m, d, url = start(mounts)
    sbx.set_faults(url, delay_ms=2000, routes="all")
    with Timer() as t:
        err, _ = ctl(d / "ctl", "echo slow")
    assert err == 0 and 1.9 < t.s < 15, (fl.errname(err), t.s)
    assert mount.read(d / "stdout") == "slow\n"
    with Timer() as t:
        assert write_file(d / "workspace" / "s.txt", b"slow data\n") == (0, 0)
    assert t.s < 20, t.s
    with Timer() as t:
        names = fl.bounded(lambda: os.listdir(d / "workspace"), 20, "ls")
    assert "s.txt" in names
    sbx.set_faults(url)
    assert sbx.get(url, "s.txt").body == b"slow data\n"
    assert fl.executed(mounts.orch, "sbx1") == ["echo slow"]


def test_command_timeout_with_delays_is_bounded(mounts):
    """timeout=1 and a command that sleeps: the contract kills it; with 2 s
    answer delays the write still returns well within timeout + grace."""
    m, d, url = start(mounts)
    with open(d / "timeout", "w") as f:
        f.write("1\n")
    sbx.set_faults(url, delay_ms=2000, routes="execute")
    err, secs = fl.bounded(lambda: ctl(d / "ctl", "sleep 30"), 40, "ctl write")
    assert err == 0 and secs < 15, (fl.errname(err), secs)
    assert mount.read(d / "status") == "timeout\n"
    assert mount.read(d / "exit") == "124\n"


# --- files ----------------------------------------------------------------

def test_lost_put_answer_close_eio_then_delivered(mounts):
    m, d, url = start(mounts, opts=["listing_ttl=30000"])
    sbx.set_faults(url, lose_answer=True, routes="files")
    data = os.urandom(5000)
    werr, cerr = write_file(d / "workspace" / "lost.bin", data)
    assert werr == 0 and cerr == errno.EIO, (werr, cerr)
    assert "1 uploads pending" in health(m)
    sbx.set_faults(url)
    assert sbx.wait_for(lambda: sbx.get(url, "lost.bin").body == data, timeout=30)
    assert sbx.wait_for(lambda: health(m) == "ok\n", timeout=10), health(m)
    with open(d / "workspace" / "lost.bin", "rb") as f:
        assert f.read() == data


def test_truncated_get_is_eio_never_half_a_file(mounts):
    m, d, url = start(mounts)
    data = bytes(range(256)) * 400
    assert sbx.put(url, "big.bin", data).status == 204
    ctl(d / "ctl", "true")  # the mount revalidates after a command
    sbx.set_faults(url, truncate_answer=True, routes="files")
    p = fl.bounded(lambda: subprocess.run(["cat", str(d / "workspace" / "big.bin")],
                                          capture_output=True, timeout=60), 60, "cat")
    if p.returncode == 0:  # only if the listing came before the fault
        raise AssertionError(f"cat succeeded with {len(p.stdout)} of {len(data)} bytes")
    assert b"Input/output error" in p.stderr or b"No such" in p.stderr, p.stderr
    sbx.set_faults(url)
    time.sleep(1.2)  # past the listing cache
    with open(d / "workspace" / "big.bin", "rb") as f:
        assert f.read() == data


def test_malformed_listing_is_eio_not_entries(mounts):
    m, d, url = start(mounts)
    assert sbx.put(url, "real.txt", b"x").status == 204
    ctl(d / "ctl", "true")
    sbx.set_faults(url, malformed_json=True, routes="files")
    try:
        names = os.listdir(d / "workspace")
        raise AssertionError(f"listing a malformed answer gave {names}")
    except OSError as e:
        assert e.errno == errno.EIO, e
    sbx.set_faults(url)
    time.sleep(1.2)
    assert "real.txt" in os.listdir(d / "workspace")


def test_hostile_listing_never_shows_bad_entries(mounts):
    m, d, url = start(mounts)
    assert sbx.put(url, "good.txt", b"good\n").status == 204
    assert sbx.put(url, "sub/inner.txt", b"in\n").status == 204
    ctl(d / "ctl", "true")
    sbx.set_faults(url, hostile_listing=True, routes="files")
    for sub in ("", "sub"):
        p = d / "workspace" / sub
        names = os.listdir(p)
        for bad in ("..", ".", "a/b", "", "/etc/passwd", "etc", "passwd"):
            assert bad not in names, (sub, names)
        for n in names:
            assert "/" not in n and n not in (".", "..") and n
            os.lstat(p / n)  # whatever is shown can be stat'ed
            assert os.lstat(p / n).st_size >= 0
        p2 = subprocess.run(["ls", "-la", str(p)], capture_output=True, text=True, timeout=30)
        assert p2.returncode == 0, p2.stderr
    assert "good.txt" in os.listdir(d / "workspace")
    assert "inner.txt" in os.listdir(d / "workspace" / "sub")
    assert mount.read(d / "workspace" / "good.txt") == "good\n"
    for bad in ("..", "a", "etc"):
        try:
            os.stat(d / "workspace" / bad / "passwd")
            raise AssertionError(f"{bad}/passwd exists")
        except OSError:
            pass
    sbx.set_faults(url)


# --- the server goes away and comes back ------------------------------------

def test_server_stops_and_comes_back_on_the_same_port(mounts):
    orch = mounts.orch
    m, d, url = start(mounts, opts=["listing_ttl=30000"])
    data = os.urandom(3000)
    orch.want_port = orch.port
    orch.stop()
    try:
        err, secs = ctl(d / "ctl", "echo while-down")
        assert err == errno.ENOTCONN, fl.errname(err)
        assert secs < 15
        assert mount.read(d / "status") == "failed\n"
        assert "not run" in info(d)["why"]
        werr, cerr = fl.bounded(lambda: write_file(d / "workspace" / "down.bin", data),
                                30, "write while down")
        assert werr == 0 and cerr == errno.EIO, (werr, cerr)
        assert "1 uploads pending" in health(m)
        time.sleep(2)
    finally:
        orch.start()
    # Back on the same port (the orchestrator keeps each sandbox's port):
    # the retry delivers it without a remount.
    assert sandbox_url(orch, "sbx1") == url
    assert sbx.wait_for(lambda: sbx.get(url, "down.bin").body == data, timeout=45,
                        interval=0.5)
    assert sbx.wait_for(lambda: health(m) == "ok\n", timeout=10), health(m)
    assert ctl(d / "ctl", "echo back")[0] == 0
    assert mount.read(d / "stdout") == "back\n"
    assert fl.executed(orch, "sbx1") == ["echo back"]
