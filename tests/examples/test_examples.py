"""Every script in examples/ runs, as its header says, against the
embedded default, and does what it claims."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402

# No conftest.py here: the mount tests import theirs by the name "conftest".
# Each test runs one script against its own embedded default (--local).

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TEST_TIMEOUT = int(os.environ.get("SANDBOXFS_TEST_TIMEOUT", "90"))


@pytest.fixture(autouse=True)
def _time_limit():
    with mount.time_limit(TEST_TIMEOUT):
        yield


@pytest.fixture
def local(tmp_path):
    m = mount.Mount(tmp_path, local=True)
    m.start()
    try:
        yield m
    finally:
        m.stop()
    m.check_log()


def run_example(*argv, cwd=EXAMPLES, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=e)
    return p


def test_every_example_is_tested_and_says_how_to_run_it():
    here = open(__file__).read()
    for f in EXAMPLES.iterdir():
        if f.is_file():
            assert f.name in here, f"examples/{f.name} has no test"
            head = f.read_text()[:1500]
            assert re.search(r"sandboxfs --local", head) and "fusermount3 -u" in head, \
                f"examples/{f.name} does not say how to run it"
            assert os.access(f, os.X_OK), f


def test_agent_loop(local):
    p = run_example(EXAMPLES / "agent-loop.sh", local.mnt)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "attempt 1: exit 0, stdout '4950'"
    assert lines[1].startswith("attempt 2: exit 2")
    assert "solved in 3 attempts (run 3)" in lines[-1]
    # the sandbox really ran the three versions, and kept the last one
    assert mount.read(local.path("agent", "workspace", "sum.sh")).count("done") == 1
    assert mount.read(local.path("agent", "runs", "2", "status")) == "exited\n"
    assert mount.read(local.path("agent", "runs", "3", "stdout")) == "5050\n"


def test_agent_loop_stops_when_the_command_cannot_run(local):
    """A ctl write that fails is the machinery (here EBUSY: the sandbox's
    seat is taken): the loop stops instead of retrying blindly."""
    os.mkdir(local.path("busy"))
    holder = subprocess.Popen(["sh", "-c", f"echo 'sleep 3' > {local.path('busy', 'ctl')}"])
    try:
        deadline = time.monotonic() + 10
        while mount.read(local.path("busy", "status")) != "running\n":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        p = run_example(EXAMPLES / "agent-loop.sh", local.mnt, "busy")
    finally:
        holder.wait(20)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "busy" in p.stderr.lower()  # the shell's report of EBUSY
    assert "attempt 1: the command could not be run (running)" in p.stderr
    assert mount.read(local.path("busy", "last")) == "1\n"  # nothing else ran


def test_ci_test_passes_and_fails_with_the_project(local, tmp_path):
    p = run_example(EXAMPLES / "ci-test.sh", local.mnt, EXAMPLES / "project", "make test",
                    env={"CI_JOB_ID": "41"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ci-test: sandbox ci-41 is ready" in p.stdout
    assert p.stdout.count("ok   ") == 3 and "ci-test: exited, exit 0" in p.stdout
    assert not local.path("ci-41").exists()  # torn down
    # a failing test suite fails the job, with its output
    broken = tmp_path / "project"
    shutil.copytree(EXAMPLES / "project", broken)
    (broken / "wc.sh").write_text("#!/bin/sh\necho 3\n")
    p = run_example(EXAMPLES / "ci-test.sh", local.mnt, broken, env={"CI_JOB_ID": "42"})
    assert p.returncode == 2, p.stdout + p.stderr
    assert "FAIL t2.txt: 3, want 0" in p.stdout and "exit 2" in p.stdout
    assert not local.path("ci-42").exists()


def test_edit(local):
    p = run_example(EXAMPLES / "edit.sh", local.mnt)
    assert p.returncode == 0, p.stdout + p.stderr
    want = "name = demo\nport = 9090\ndebug = true\nworkers = 4\n"
    assert p.stdout == want + "4\n"
    assert mount.read(local.path("editor", "workspace", "app.conf")) == want
    # vim left no swap or backup file behind in the workspace
    assert os.listdir(local.path("editor", "workspace")) == ["app.conf"]


def test_drive_py(local):
    p = run_example("/usr/bin/python3", EXAMPLES / "drive.py", local.mnt)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == "state: ready"
    assert "exit 0: 2 3 5 7 11 13 17 19 23 29" in p.stdout
    assert p.stdout.rstrip().endswith("ok")
    assert mount.read(local.path("pydrive", "last")) == "3\n"


def test_parallel(local):
    t0 = time.monotonic()
    p = run_example(EXAMPLES / "parallel.sh", local.mnt, 10)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split() for line in p.stdout.splitlines()[1:-1]]
    assert len(rows) == 10
    for name, code, out in rows:
        n = int(name.rsplit("-", 1)[1])
        assert out == str(n * n) and code == str(int(n % 3 == 0)), (name, code, out)
    assert p.stdout.splitlines()[-1] == "10 sandboxes, 3 commands failed"
    # ten one-second commands in parallel, not one after the other
    assert took < 8, took
    assert sorted(os.listdir(local.mnt)) == [".sandboxfs"]  # all torn down
