"""ctl and the result files (DESIGN.md §2), driven with ordinary programs."""
import ctypes
import errno
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import executed, sandbox_url
import mount
import sbx

sh = mount.sh


def wait_status(d, want, timeout=10):
    return sbx.wait_for(lambda: mount.read(d / "status").strip() == want, timeout=timeout)


def test_exit_code_is_a_result_not_an_error(sandbox, orch):
    p = sh(f"echo 'exit 3' > {sandbox}/ctl")
    assert p.returncode == 0, p.stderr
    assert mount.read(sandbox / "exit") == "3\n"
    assert mount.read(sandbox / "status") == "exited\n"
    assert mount.read(sandbox / "last") == "1\n"
    assert executed(orch, "sbx1") == ["exit 3"]


def test_output_files_and_dash(sandbox):
    p = sh(f"echo 'echo out; echo err >&2; exit 0' > {sandbox}/ctl", shell="dash")
    assert p.returncode == 0, p.stderr
    assert mount.read(sandbox / "stdout") == "out\n"
    assert mount.read(sandbox / "stderr") == "err\n"
    assert mount.read(sandbox / "exit") == "0\n"
    # stat sees the size of what a read returns
    assert os.stat(sandbox / "stdout").st_size == 4


def test_several_commands_through_one_descriptor(sandbox):
    p = sh(f"exec 3>{sandbox}/ctl; echo 'echo a' >&3; echo 'echo b' >&3; exec 3>&-; "
           f"cat {sandbox}/stdout {sandbox}/runs/1/stdout")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "b\na\n"
    assert sorted(os.listdir(sandbox / "runs")) == ["1", "2"]


def test_empty_command_is_einval(sandbox, orch):
    p = sh(f"echo > {sandbox}/ctl")
    assert p.returncode != 0
    assert "Invalid argument" in p.stderr
    assert executed(orch, "sbx1") == []


def test_second_writer_gets_ebusy(sandbox, orch):
    first = subprocess.Popen(["bash", "-c", f"echo 'sleep 2' > {sandbox}/ctl"])
    try:
        assert wait_status(sandbox, "running")
        for shell in ("bash", "dash"):
            p = sh(f"echo 'echo second' > {sandbox}/ctl", shell=shell)
            assert p.returncode != 0
            assert "busy" in p.stderr.lower(), p.stderr
        # a write through a descriptor opened while idle is refused too
    finally:
        assert first.wait(30) == 0
    assert executed(orch, "sbx1") == ["sleep 2"]
    assert mount.read(sandbox / "exit") == "0\n"


def test_overlong_command_runs_nothing(sandbox, orch):
    before = sbx.stats(sandbox_url(orch, "sbx1"))["executes"]
    fd = os.open(sandbox / "ctl", os.O_WRONLY)
    try:
        with pytest.raises(OSError) as e:
            os.write(fd, b"echo " + b"x" * (1 << 20) + b"\n")
        assert e.value.errno == errno.EFBIG
        with pytest.raises(OSError) as e:
            os.write(fd, b"y" * (4 << 20))
        assert e.value.errno == errno.EFBIG
    finally:
        os.close(fd)
    # dd writes its whole block in one write(2) and reports the error
    big = sandbox.parent.parent / "big"
    big.write_bytes(b"echo " + b"z" * (2 << 20))
    p = sh(f"dd if={big} of={sandbox}/ctl bs=4M")
    assert p.returncode != 0 and "too large" in p.stderr.lower(), p.stderr
    # bash's echo flushes a long line in 4 KiB multiples: the first piece
    # is refused, and so is the rest of that descriptor
    p = sh(f"echo 'echo {'w' * 10000}' > {sandbox}/ctl")
    assert p.returncode != 0 and "too large" in p.stderr.lower(), p.stderr
    assert sbx.stats(sandbox_url(orch, "sbx1"))["executes"] == before
    assert executed(orch, "sbx1") == []
    assert mount.read(sandbox / "last") == "0\n"


def test_reading_exit_waits_for_the_command(sandbox):
    t0 = time.monotonic()
    p = sh(f"echo 'sleep 2; exit 7' > {sandbox}/ctl & sleep 0.3; cat {sandbox}/exit; wait")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "7\n"
    assert time.monotonic() - t0 >= 1.8


def test_nonblocking_read_is_eagain(sandbox):
    w = subprocess.Popen(["bash", "-c", f"echo 'sleep 2; echo done' > {sandbox}/ctl"])
    try:
        assert wait_status(sandbox, "running")
        for name in ("exit", "stdout", "stderr"):
            fd = os.open(sandbox / name, os.O_RDONLY | os.O_NONBLOCK)
            try:
                with pytest.raises(BlockingIOError):
                    os.read(fd, 100)
            finally:
                os.close(fd)
        # status, last and info never wait
        t0 = time.monotonic()
        assert mount.read(sandbox / "status") == "running\n"
        assert mount.read(sandbox / "last") == "1\n"
        assert json.loads(mount.read(sandbox / "info"))["running"] is True
        assert time.monotonic() - t0 < 1
    finally:
        assert w.wait(30) == 0
    assert mount.read(sandbox / "stdout") == "done\n"


def test_sigint_interrupts_a_waiting_cat(sandbox):
    w = subprocess.Popen(["bash", "-c", f"echo 'sleep 4' > {sandbox}/ctl"])
    try:
        assert wait_status(sandbox, "running")
        # SIGINT's default action, even when this runs from a background
        # job of a shell (which starts it ignored)
        cat = subprocess.Popen(["cat", str(sandbox / "exit")], stdout=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(0.5)
        assert cat.poll() is None  # it waits
        t0 = time.monotonic()
        cat.send_signal(signal.SIGINT)
        rc = cat.wait(5)
        assert rc == -signal.SIGINT
        assert time.monotonic() - t0 < 1.5
    finally:
        assert w.wait(30) == 0
    assert mount.read(sandbox / "exit") == "0\n"


WRITER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda *a: None)
signal.siginterrupt(signal.SIGUSR1, True)
fd = os.open(sys.argv[1], os.O_WRONLY)
cmd = sys.argv[2].encode()
print("start", flush=True)
n = libc.write(fd, cmd, len(cmd))
print(n, ctypes.get_errno(), flush=True)
"""


def test_interrupted_write_is_eintr_and_the_result_is_kept(sandbox, orch, mnt):
    before = mnt.stats()
    w = subprocess.Popen(["/usr/bin/python3", "-c", WRITER, str(sandbox / "ctl"),
                          "sleep 2; echo kept; exit 5"], stdout=subprocess.PIPE, text=True)
    assert w.stdout.readline() == "start\n"
    assert wait_status(sandbox, "running")
    w.send_signal(signal.SIGUSR1)
    out = w.communicate(timeout=5)[0].split()
    assert out == ["-1", str(errno.EINTR)]
    assert mount.read(sandbox / "status") == "running\n"
    # the kernel's interrupt woke the waiting writer (it does not poll)
    after = mnt.stats()
    assert after["interrupted_writes"] - before["interrupted_writes"] == 1
    assert after["interrupts_delivered"] - before["interrupts_delivered"] == 1
    assert mount.read(sandbox / "exit") == "5\n"  # waits, then the result
    assert mount.read(sandbox / "stdout") == "kept\n"
    assert mount.read(sandbox / "runs/1/status") == "exited\n"
    assert executed(orch, "sbx1") == ["sleep 2; echo kept; exit 5"]


def test_timeout_status(sandbox):
    p = sh(f"echo 1 > {sandbox}/timeout && cat {sandbox}/timeout")
    assert p.stdout == "1\n", p.stderr
    t0 = time.monotonic()
    p = sh(f"echo 'sleep 10' > {sandbox}/ctl")
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t0 < 8
    assert mount.read(sandbox / "exit") == "124\n"
    assert mount.read(sandbox / "status") == "timeout\n"
    # a program that exits 124 by itself is not a timeout
    sh(f"echo 30 > {sandbox}/timeout; echo 'exit 124' > {sandbox}/ctl", check=True)
    assert mount.read(sandbox / "status") == "exited\n"
    p = sh(f"echo nonsense > {sandbox}/timeout")
    assert p.returncode != 0 and "Invalid argument" in p.stderr


def test_runs_history_and_info(sandbox, orch):
    for i in range(3):
        sh(f"echo 'echo run{i}' > {sandbox}/ctl", check=True)
    assert sorted(os.listdir(sandbox / "runs"), key=int) == ["1", "2", "3"]
    r2 = sandbox / "runs" / "2"
    assert sorted(os.listdir(r2)) == ["command", "exit", "info", "status", "stderr", "stdout"]
    assert mount.read(r2 / "command") == "echo run1\n"
    assert mount.read(r2 / "stdout") == "run1\n"
    assert mount.read(r2 / "exit") == "0\n"
    info = json.loads(mount.read(r2 / "info"))
    assert info["seq"] == 2 and info["status"] == "exited" and info["exit"] == 0
    sinfo = json.loads(mount.read(sandbox / "info"))
    assert sinfo["id"] == "sbx1" and sinfo["owned"] is True and sinfo["attached"] is False
    assert sinfo["commands_run"] == 3 and sinfo["state"] == "ready"
    url = sandbox_url(orch, "sbx1")
    for name in ("info", "state", "status", "runs/2/info"):
        assert url not in mount.read(sandbox / name)


def test_large_output_round_trips(sandbox):
    p = sh(f"echo 'head -c 300000 /dev/zero | tr \"\\\\0\" a; echo; echo e >&2' > {sandbox}/ctl")
    assert p.returncode == 0, p.stderr
    out = mount.read(sandbox / "stdout")
    assert len(out) == 300001 and set(out[:-1]) == {"a"}
    assert mount.read(sandbox / "stderr") == "e\n"


def test_xattrs_mirror_the_small_facts(sandbox):
    sh(f"echo 'exit 4' > {sandbox}/ctl", check=True)
    p = sh(f"getfattr -d --absolute-names {sandbox}")
    assert p.returncode == 0, p.stderr
    assert 'user.sandbox.state="ready"' in p.stdout
    assert 'user.sandbox.status="exited"' in p.stdout
    assert 'user.sandbox.exit="4"' in p.stdout
    assert 'user.sandbox.last="1"' in p.stdout
    p = sh(f"getfattr --only-values -n user.sandbox.exit {sandbox}/runs/1")
    assert p.stdout == "4"


def test_unreachable_sandbox_is_enotconn(tmp_path):
    # an attached sandbox whose server is gone: nothing can be sent
    srv = sbx.Server(tmp=None).start()
    url = srv.url
    srv.cleanup()
    lst = tmp_path / "sandboxes"
    lst.write_text(f"dead {url}\n")
    m = mount.Mount(tmp_path, sandboxes=lst)
    m.secrets.append(url)
    with m:
        p = sh(f"echo 'echo hi' > {m.path('dead', 'ctl')}")
        assert p.returncode != 0
        assert "not connected" in p.stderr.lower(), p.stderr
        assert mount.read(m.path("dead", "status")) == "failed\n"
        assert mount.read(m.path("dead", "exit")) == ""
        assert "not run" in json.loads(mount.read(m.path("dead", "info")))["why"]
    m.check_log(allow=[r"not run"])


def test_seat_taken_by_another_client_is_ebusy(sandbox, orch):
    # the server answers 409 while a command of someone else runs
    url = sandbox_url(orch, "sbx1")
    import threading
    t = threading.Thread(target=lambda: sbx.execute(url, "sleep 2"))
    t.start()
    try:
        assert sbx.wait_for(lambda: "sleep 2" in sbx.log(url))
        p = sh(f"echo 'echo mine' > {sandbox}/ctl")
        assert p.returncode != 0 and "busy" in p.stderr.lower(), p.stderr
        assert mount.read(sandbox / "status") == "failed\n"
        assert mount.read(sandbox / "exit") == ""
        assert "not run" in json.loads(mount.read(sandbox / "info"))["why"]
    finally:
        t.join(30)
    assert sbx.log(url) == ["sleep 2"]


def test_output_is_byte_exact(tmp_path, orch):
    """NUL bytes (\\u0000 in the execute answer) are kept: stdout, stderr,
    runs/SEQ and info count every byte, inline and stored in a file, and
    so does the journal (a remount shows the same bytes)."""
    big = 70000  # past the inline bound: stored under STATE/outputs
    m = mount.Mount(tmp_path, server=orch)
    with m:
        d = m.path("sbx1")
        os.mkdir(d)
        sh(f"printf '%s\\n' \"printf 'a\\\\000b'; printf '\\\\000e\\\\000' >&2\" > {d}/ctl",
           check=True)
        assert executed(orch, "sbx1") == ["printf 'a\\000b'; printf '\\000e\\000' >&2"]
        sh(f"echo 'head -c {big} /dev/zero; printf z' > {d}/ctl", check=True)
        want = {"runs/1/stdout": b"a\0b", "runs/1/stderr": b"\0e\0",
                "stdout": b"\0" * big + b"z", "runs/2/stdout": b"\0" * big + b"z"}

        def check(d):
            for name, data in want.items():
                with open(d / name, "rb") as f:
                    assert f.read() == data, name
                assert os.stat(d / name).st_size == len(data), name
            info = json.loads(mount.read(d / "runs/1/info"))
            assert info["stdout_bytes"] == 3 and info["truncated"] is False, info
            assert mount.read(d / "runs/1/status") == "exited\n"

        check(d)
    m2 = mount.Mount(tmp_path, server=orch)
    with m2:
        check(m2.path("sbx1"))
    m2.check_log()
