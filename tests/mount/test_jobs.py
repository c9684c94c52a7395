"""Background jobs: ID/spawn and ID/jobs/N/ (DESIGN.md §1, §2).

A job runs detached in the sandbox, in a process group of its own; its
output is read while it runs, it is killed through jobs/N/ctl, and it is
journaled like a command. Results are checked on the server side through
the contract (/files, and commands run through /execute), not only through
the mount.
"""
import errno
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import executed, sandbox_url
import mount
import sbx

sh = mount.sh

LOOP = 'i=0; while :; do i=$((i+1)); echo "line $i"; sleep 0.3; done'


def quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def spawn(d, command):
    p = sh(f"echo {quote(command)} > {d}/spawn")
    assert p.returncode == 0, p.stderr
    return sorted(os.listdir(d / "jobs"), key=int)[-1]


def info(d, n):
    return json.loads(mount.read(d / "jobs" / str(n) / "info"))


def status(d, n):
    return mount.read(d / "jobs" / str(n) / "status").strip()


def group_alive(url, pgid):
    """Processes of the group that are not zombies, counted on the server."""
    r = sbx.execute(url, f"ps -e -o pgid=,stat= | awk '$1 == {pgid} && $2 !~ /^Z/' | wc -l")
    assert r.status == 200, r
    return int(r.json()["stdout"].strip())


def read_lines(fd, want, deadline):
    """Reads from a blocking descriptor until `want` whole lines came."""
    data = b""
    while data.count(b"\n") < want:
        assert time.monotonic() < deadline, data
        chunk = os.read(fd, 4096)
        assert chunk, "end of output while the job runs"
        data += chunk
    return data


def test_job_streams_while_a_foreground_command_runs_then_is_killed(sandbox, orch):
    d = sandbox
    url = sandbox_url(orch, "sbx1")
    t0 = time.monotonic()
    n = spawn(d, LOOP)
    assert time.monotonic() - t0 < 5  # the spawn returns at once
    assert n == "1"
    j = d / "jobs" / "1"
    assert sorted(os.listdir(j)) == sorted(
        ["ctl", "command", "stdout", "stderr", "exit", "status", "info"])
    assert mount.read(j / "command") == LOOP + "\n"
    assert status(d, 1) == "running"
    pgid = info(d, 1)["pid"]
    assert pgid > 1 and group_alive(url, pgid) >= 1

    deadline = time.monotonic() + 30
    fd = os.open(j / "stdout", os.O_RDONLY)
    try:
        first = read_lines(fd, 2, deadline)
        # a foreground command while the job runs, and its own output
        p = sh(f"echo 'echo hi' > {d}/ctl")
        assert p.returncode == 0, p.stderr
        assert mount.read(d / "stdout") == "hi\n"
        assert mount.read(d / "exit") == "0\n"
        # the job went on meanwhile: more lines, in order
        more = read_lines(fd, 2, deadline)
        lines = (first + more).decode().splitlines()
        assert lines[:4] == [f"line {i}" for i in range(1, 5)], lines
    finally:
        os.close(fd)

    # O_NONBLOCK at the current end: EAGAIN, never a wait
    fd = os.open(j / "stdout", os.O_RDONLY | os.O_NONBLOCK)
    try:
        got, again = b"", False
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError as e:
                assert e.errno == errno.EAGAIN
                again = True
                break
            assert chunk
            got += chunk
        assert again and got.startswith(b"line 1\nline 2\n")
    finally:
        os.close(fd)
    # exit waits while it runs: O_NONBLOCK says so
    fd = os.open(j / "exit", os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(BlockingIOError):
            os.read(fd, 64)
    finally:
        os.close(fd)

    p = sh(f"echo kill > {j}/ctl")
    assert p.returncode == 0, p.stderr
    assert status(d, 1) == "killed"
    assert mount.read(j / "exit") == ""
    # its whole process group is gone on the server
    assert group_alive(url, pgid) == 0
    r = sbx.execute(url, f"kill -0 -{pgid} 2>/dev/null && ps -o pid=,stat= -g {pgid}")
    assert r.status == 200 and "S" not in r.json()["stdout"] and "R" not in r.json()["stdout"]
    # its output is whole and ends: a plain cat returns
    out = mount.read(j / "stdout").splitlines()
    assert len(out) >= 4 and out == [f"line {i}" for i in range(1, len(out) + 1)]
    # the server's copy of it says killed; the workspace never shows it
    entries = sbx.list_dir(url, "").json()["entries"]
    jobdir = info(d, 1)["directory"]
    assert jobdir in [e["name"] for e in entries]
    names = [e["name"] for e in sbx.list_dir(url, jobdir).json()["entries"]]
    assert "killed" in names and "rc" not in names
    assert not [x for x in os.listdir(d / "workspace") if x.startswith(".sandboxfs-")]
    assert os.getxattr(j, "user.sandbox.status") == b"killed"
    # killing it again changes nothing
    p = sh(f"echo kill > {j}/ctl")
    assert p.returncode == 0 and status(d, 1) == "killed"
    p = sh(f"echo stop > {j}/ctl")
    assert p.returncode != 0 and "Invalid argument" in p.stderr


def test_job_exit_status_env_cwd_and_the_journal(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        os.mkdir(m.path("ej"))
        d = m.path("ej")
        url = sandbox_url(orch, "ej")
        m.secrets.append(url)
        sh(f"printf 'GREETING=hello\\nTOKEN=j0b-s3cret\\n' > {d}/env", check=True)
        p = sh(f"echo 'mkdir -p src/app' > {d}/ctl")
        assert p.returncode == 0
        sh(f"echo src/app > {d}/cwd", check=True)
        n = spawn(d, 'echo "$GREETING from $(basename "$PWD")"; echo oops >&2; '
                     'echo "$TOKEN" > made.txt; exit 7')
        j = d / "jobs" / n
        # exit waits for the end of the job
        assert mount.read(j / "exit") == "7\n"
        assert status(d, n) == "exited"
        assert mount.read(j / "stdout") == "hello from app\n"
        assert mount.read(j / "stderr") == "oops\n"
        assert os.getxattr(j, "user.sandbox.exit") == b"7"
        i = info(d, n)
        assert i["status"] == "exited" and i["exit"] == 7 and i["stdout_bytes"] == 15
        # on the server: what it made where cwd said, and its exit code
        assert sbx.get(url, "src/app/made.txt").body == b"j0b-s3cret\n"
        assert sbx.get(url, i["directory"] + "/rc").body == b"7\n"
        # the spawn went through /execute once; the foreground runs show
        # none of it
        assert [c for c in executed(orch, "ej") if "setsid" in c].__len__() == 1
        assert os.listdir(d / "runs") == ["1"]
        # the journal names the job and never the environment's values
        dump = sh(f"{mount.sandboxfs_binary()} --dump-journal {m.state}", check=True).stdout
        assert "JOB_INTENT" in dump and "JOB_STARTED" in dump and "JOB_EXITED" in dump
        assert "j0b-s3cret" not in dump and "hello" not in dump
        assert "j0b-s3cret" not in mount.read(j / "info")
        m.secrets.append("j0b-s3cret")
    finally:
        m.stop()
    m.check_log()


def test_spawn_and_kill_while_a_foreground_command_runs_are_ebusy(sandbox, orch):
    d = sandbox
    n = spawn(d, "sleep 30")
    fg = subprocess.Popen(["bash", "-c", f"echo 'sleep 3' > {d}/ctl"])
    try:
        assert sbx.wait_for(lambda: mount.read(d / "status") == "running\n", timeout=10)
        p = sh(f"echo 'echo nope' > {d}/spawn")
        assert p.returncode != 0 and "Device or resource busy" in p.stderr, p.stderr
        p = sh(f"echo kill > {d}/jobs/{n}/ctl")
        assert p.returncode != 0 and "Device or resource busy" in p.stderr, p.stderr
        assert os.listdir(d / "jobs") == [n]
        assert status(d, n) == "running"
    finally:
        assert fg.wait(30) == 0
    p = sh(f"echo kill > {d}/jobs/{n}/ctl")
    assert p.returncode == 0, p.stderr
    assert status(d, n) == "killed"
    assert spawn(d, "echo later") == str(int(n) + 1)
    assert sbx.wait_for(lambda: status(d, int(n) + 1) == "exited", timeout=10)


def test_jobs_survive_a_remount(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        os.mkdir(m.path("rj"))
        d = m.path("rj")
        url = sandbox_url(orch, "rj")
        m.secrets.append(url)
        spawn(d, "echo done; exit 3")
        assert mount.read(d / "jobs" / "1" / "exit") == "3\n"
        # (bounded: a test that fails before "go" leaves no process behind)
        spawn(d, "echo first; for i in $(seq 600); do [ -e go ] && break; sleep 0.1; done; "
                 "echo second; exit 4")
        fd = os.open(d / "jobs" / "2" / "stdout", os.O_RDONLY)
        try:
            assert read_lines(fd, 1, time.monotonic() + 20) == b"first\n"
        finally:
            os.close(fd)
        pgid = info(d, 2)["pid"]
    finally:
        m.stop()
    m.check_log()
    # the job goes on without the mount
    assert group_alive(url, pgid) >= 1
    sbx.put(url, "go", b"")
    m2 = mount.Mount(tmp_path, server=orch).start()
    try:
        d = m2.path("rj")
        assert sorted(os.listdir(d / "jobs"), key=int) == ["1", "2"]
        assert status(d, 1) == "exited"
        assert mount.read(d / "jobs" / "1" / "stdout") == "done\n"
        assert mount.read(d / "jobs" / "1" / "command") == "echo done; exit 3\n"
        # its status is fetched afresh; exit waits if it has not yet ended
        assert mount.read(d / "jobs" / "2" / "exit") == "4\n"
        assert status(d, 2) == "exited"
        assert mount.read(d / "jobs" / "2" / "stdout") == "first\nsecond\n"
        # numbers go on
        assert spawn(d, "true") == "3"
    finally:
        m2.stop()
    m2.check_log()


def test_an_unknown_spawn_is_never_sent_again(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        os.mkdir(m.path("uj"))
        d = m.path("uj")
        url = sandbox_url(orch, "uj")
        m.secrets.append(url)
        sbx.set_faults(url, lose_answer=True, routes="execute")
        try:
            p = sh(f"echo 'echo ran >> ran.txt' > {d}/spawn")
        finally:
            sbx.set_faults(url)
        assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
        assert os.listdir(d / "jobs") == ["1"]
        assert status(d, 1) == "unknown"
        assert info(d, 1)["error"]
        assert mount.read(d / "jobs" / "1" / "exit") == ""
        # it did run there, once
        assert sbx.wait_for(lambda: sbx.get(url, "ran.txt").status == 200, timeout=10)
    finally:
        m.stop()
    m.allow = ()
    m.check_log(allow=("outcome unknown", "answer lost", "lose"))
    m2 = mount.Mount(tmp_path, server=orch).start()
    try:
        d = m2.path("uj")
        assert status(d, 1) == "unknown"
        spawn(d, "true")
        assert sbx.wait_for(lambda: status(d, 2) == "exited", timeout=10)
    finally:
        m2.stop()
    spawns = [c for c in executed(orch, "uj") if "setsid" in c]
    assert len(spawns) == 2
    assert sbx.get(url, "ran.txt").body == b"ran\n"


def test_rmdir_of_a_job_and_writes_elsewhere_are_refused(sandbox):
    d = sandbox
    n = spawn(d, "echo x")
    j = d / "jobs" / n
    with pytest.raises(OSError) as e:
        os.rmdir(j)
    assert e.value.errno == errno.EPERM
    with pytest.raises(OSError) as e:
        os.open(j / "stdout", os.O_WRONLY)
    assert e.value.errno == errno.EACCES
    assert not (d / "jobs" / "9").exists()
    assert oct(os.stat(d / "spawn").st_mode & 0o777) == "0o600"


def test_tail_f_of_a_job_started_before_its_first_line(sandbox, orch):
    """A real tail -f opened while the job's output is still empty follows
    it (the open waits for the first byte, as a FIFO's does)."""
    from test_stream import tail_f_on_a_terminal
    d = sandbox
    n = spawn(d, "sleep 1.5; for i in $(seq 1 40); do echo tick $i; sleep 0.3; done")
    assert os.stat(d / "jobs" / n / "stdout").st_size == 0
    lines = tail_f_on_a_terminal(d / "jobs" / n / "stdout", 9,
                                 enough_lines=3).splitlines()
    assert status(d, n) == "running"
    assert len(lines) >= 3, lines
    assert lines == [f"tick {i}" for i in range(1, len(lines) + 1)]
    assert sh(f"echo kill > {d}/jobs/{n}/ctl").returncode == 0
    assert status(d, n) == "killed"
