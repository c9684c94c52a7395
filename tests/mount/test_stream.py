"""stdout and stderr while a command runs, and past the contract's 1 MiB
(DESIGN.md §2): read with real head, tail -f and cat, checked against what
the command wrote and against the server's workspace."""
import errno
import json
import os
import pty
import select
import subprocess
import time

import pytest

from conftest import executed, sandbox_url
import mount
import sbx

sh = mount.sh


def start(d, command):
    """A ctl write in the background: the Popen of the writing shell."""
    q = "'" + command.replace("'", "'\\''") + "'"
    return subprocess.Popen(["sh", "-c", f"echo {q} > {d}/ctl"])


def hidden_left(url):
    """The mount's per-run files left in the workspace (sbx.mount_files_left)."""
    return sbx.mount_files_left(url)


def test_head_gets_the_first_lines_before_the_command_ends(sandbox, orch):
    d = sandbox
    w = start(d, "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.5; done")
    try:
        p = sh(f"head -n 2 {d}/stdout", timeout=20)
        assert p.returncode == 0 and p.stdout == "line 1\nline 2\n"
        # before the command's 4 s were over
        assert w.poll() is None, "the command had already ended"
        assert mount.read(d / "status") == "running\n"
    finally:
        assert w.wait(20) == 0
    # once it ended, cat returns everything and the run keeps it
    assert mount.read(d / "stdout") == "".join(f"line {i}\n" for i in range(1, 9))
    assert mount.read(d / "runs" / "1" / "stdout") == mount.read(d / "stdout")
    assert hidden_left(sandbox_url(orch, "sbx1")) == []


def tail_f_on_a_terminal(path, seconds, enough_lines=None):
    """What a real `tail -f path` printed on a terminal (a pty, so its
    output is line-buffered as a user's is) in the given time, or until it
    printed enough_lines whole lines (a loaded machine may need the whole
    time; an idle one returns early)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(["tail", "-f", str(path)], stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    break
                if enough_lines and out.count(b"\n") >= enough_lines:
                    break
    finally:
        p.terminate()
        p.wait(10)
        os.close(master)
    return out.decode().replace("\r\n", "\n")


def test_tail_f_follows_a_running_command(sandbox, orch):
    d = sandbox
    w = start(d, "for i in $(seq 1 40); do echo tick $i; sleep 0.3; done")
    try:
        # once the command printed something (GNU tail reads a file that
        # is empty when it opens it to its end before following it)
        assert sbx.wait_for(lambda: os.stat(d / "stdout").st_size > 0, timeout=10)
        # a real tail -f on a terminal: it printed what came, while the
        # command still ran (up to 8 s of its 12 s)
        lines = tail_f_on_a_terminal(d / "stdout", 8, enough_lines=3).splitlines()
        assert w.poll() is None, "the command had already ended"
        assert len(lines) >= 3, lines
        assert lines == [f"tick {i}" for i in range(1, len(lines) + 1)]
    finally:
        assert w.wait(20) == 0
    assert mount.read(d / "stdout").splitlines()[-1] == "tick 40"


def test_a_read_at_the_end_waits_or_is_eagain(sandbox, orch):
    d = sandbox
    w = start(d, "echo first; sleep 2; echo second")
    try:
        assert sbx.wait_for(lambda: os.stat(d / "stdout").st_size == 6, timeout=10)
        fd = os.open(d / "stdout", os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert os.pread(fd, 100, 0) == b"first\n"
            with pytest.raises(OSError) as e:
                os.pread(fd, 100, 6)
            assert e.value.errno == errno.EAGAIN
        finally:
            os.close(fd)
        # a blocking read at the end returns once more is written
        fd = os.open(d / "stdout", os.O_RDONLY)
        try:
            assert os.pread(fd, 100, 6) == b"second\n"
        finally:
            os.close(fd)
    finally:
        assert w.wait(20) == 0


def test_output_past_one_mib_is_kept_whole(sandbox, orch):
    d = sandbox
    url = sandbox_url(orch, "sbx1")
    sh(f"echo 'head -c 3000000 /dev/zero | tr \"\\\\0\" x; echo err >&2; exit 7' > {d}/ctl",
       check=True)
    assert mount.read(d / "exit") == "7\n"
    assert os.stat(d / "stdout").st_size == 3000000
    assert (d / "stdout").read_bytes() == b"x" * 3000000
    assert mount.read(d / "stderr") == "err\n"
    assert json.loads(mount.read(d / "runs" / "1" / "info"))["truncated"] is False
    assert (d / "runs" / "1" / "stdout").read_bytes() == b"x" * 3000000
    assert hidden_left(url) == []
    assert not [n for n in os.listdir(d / "workspace") if n.startswith(".sandboxfs-")]


def test_max_output_bounds_what_is_kept(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["max_output=64K"]).start()
    try:
        os.mkdir(m.path("mo"))
        d = m.path("mo")
        sh(f"echo 'head -c 3000000 /dev/zero | tr \"\\\\0\" y' > {d}/ctl", check=True)
        assert mount.read(d / "exit") == "0\n"
        assert (d / "stdout").read_bytes() == b"y" * 65536
        assert json.loads(mount.read(d / "runs" / "1" / "info"))["truncated"] is True
        assert hidden_left(sandbox_url(orch, "mo")) == []
    finally:
        m.stop()


def test_stream_no_sends_the_command_without_pieces(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["stream=no"]).start()
    try:
        os.mkdir(m.path("plain"))
        d = m.path("plain")
        sh(f"echo 'echo plain; exit 4' > {d}/ctl")
        assert mount.read(d / "stdout") == "plain\n"
        assert mount.read(d / "exit") == "4\n"
        # not split into pieces: the user's text, then only the listing of
        # what it changed (for stat, test_changes.py)
        raw = [c if isinstance(c, str) else c["command"]
               for c in sbx.log(sandbox_url(orch, "plain"), raw=True)]
        assert len(raw) == 1 and "split" not in raw[0] and "find . " in raw[0]
        assert executed(orch, "plain") == ["echo plain; exit 4"]
    finally:
        m.stop()


def test_timeout_and_signals_keep_their_meaning(sandbox, orch):
    d = sandbox
    sh(f"echo 1 > {d}/timeout", check=True)
    sh(f"echo 'echo before; sleep 5; echo after' > {d}/ctl", check=True)
    assert mount.read(d / "status") == "timeout\n"
    assert mount.read(d / "exit") == "124\n"
    assert mount.read(d / "stdout") == "before\n"  # what it wrote until then
    sh(f"echo 60 > {d}/timeout", check=True)
    sh(f"echo 'echo x; kill -TERM $$' > {d}/ctl", check=True)
    assert mount.read(d / "stdout") == "x\n"
    assert mount.read(d / "exit") == "143\n"
    # a killed wrapper never removed its pieces: the mount did, one by one
    assert hidden_left(sandbox_url(orch, "sbx1")) == []


def test_tail_f_started_before_the_first_byte(sandbox, orch):
    d = sandbox
    w = start(d, "sleep 1.5; for i in $(seq 1 40); do echo tick $i; sleep 0.3; done")
    try:
        assert sbx.wait_for(lambda: mount.read(d / "status") == "running\n", timeout=10)
        assert os.stat(d / "stdout").st_size == 0
        # a real tail -f opened while the output is still empty follows it
        lines = tail_f_on_a_terminal(d / "stdout", 9, enough_lines=3).splitlines()
        assert w.poll() is None, "the command had already ended"
        assert len(lines) >= 3, lines
        assert lines == [f"tick {i}" for i in range(1, len(lines) + 1)]
    finally:
        assert w.wait(20) == 0


def test_an_open_before_the_first_byte_waits_unless_nonblock(sandbox, orch):
    d = sandbox
    w = start(d, "sleep 2; echo late")
    try:
        assert sbx.wait_for(lambda: mount.read(d / "status") == "running\n", timeout=10)
        # O_NONBLOCK: the open returns at once, and a read says EAGAIN
        t0 = time.monotonic()
        fd = os.open(d / "stdout", os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert time.monotonic() - t0 < 1
            with pytest.raises(OSError) as e:
                os.read(fd, 10)
            assert e.value.errno == errno.EAGAIN
        finally:
            os.close(fd)
        # a blocking open waits like a FIFO's, and a signal ends the wait
        p = subprocess.run(["timeout", "-s", "INT", "0.5", "cat", str(d / "stdout")],
                           capture_output=True)
        assert p.returncode == 124 and p.stdout == b""
        assert w.poll() is None, "the command had already ended"
        # the open returns with the first byte, and the run is unharmed
        fd = os.open(d / "stdout", os.O_RDONLY)
        try:
            assert os.fstat(fd).st_size == 5
            assert os.read(fd, 100) == b"late\n"
        finally:
            os.close(fd)
    finally:
        assert w.wait(20) == 0
    assert mount.read(d / "exit") == "0\n"
