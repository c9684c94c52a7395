"""The streaming wrapper starts only the processes a run needs
(mount/stream.c): a process start costs 2-3 ms on a small VM, several per
command. The sandbox here runs with a PATH of logging shims in front of the
real tools, so the test counts what the wrapper started, by name."""
import os
import shutil

import pytest

import mount
import sbx

sh = mount.sh

TOOLS = ["split", "find", "stat", "mkdir", "rm", "cat", "mv", "touch", "date", "readlink"]


@pytest.fixture
def logged(tmp_path, mnt):
    """A sandbox whose tools log their names to tmp/started, attached."""
    shims = tmp_path / "shims"
    shims.mkdir()
    log = tmp_path / "started"
    for t in TOOLS:
        real = shutil.which(t)
        assert real, t
        (shims / t).write_text(f"#!/bin/sh\necho {t} >> {log}\nexec {real} \"$@\"\n")
        os.chmod(shims / t, 0o755)
    with sbx.Server(tmp=None, env={"PATH": f"{shims}:/usr/bin:/bin"}) as srv:
        mnt.secrets.append(srv.url)
        with open(mnt.path(".sandboxfs", "ctl"), "w") as f:
            f.write(f"attach lg {srv.url}\n")
        yield mnt.path("lg"), srv, log


def started(log, command, d):
    """The tools the wrapper started for one command, sorted."""
    log.write_text("")
    q = "'" + command.replace("'", "'\\''") + "'"
    p = sh(f"echo {q} > {d}/ctl")
    assert p.returncode == 0, p.stderr
    return sorted(log.read_text().split())


def test_a_quiet_command_starts_two_splits_and_the_find(logged):
    d, srv, log = logged
    started(log, "true", d)  # the first run makes .sandboxfs-out and the mark
    assert started(log, "true", d) == ["find", "split", "split"]
    assert mount.read(d / "exit") == "0\n"
    # and the workspace root stayed as it was: nothing listed as changed
    assert sbx.mount_files_left(srv.url) == []


def test_output_adds_its_cat_and_one_rm(logged):
    d, srv, log = logged
    started(log, "true", d)
    assert started(log, "echo out", d) == ["cat", "find", "rm", "split", "split"]
    assert mount.read(d / "stdout") == "out\n"
    assert started(log, "echo out; echo err >&2; exit 3", d) == \
        ["cat", "cat", "find", "rm", "split", "split"]
    assert (mount.read(d / "stdout"), mount.read(d / "stderr"), mount.read(d / "exit")) == \
        ("out\n", "err\n", "3\n")
    assert sbx.mount_files_left(srv.url) == []


def test_a_change_is_listed_with_its_stat(logged):
    d, srv, log = logged
    started(log, "true", d)
    assert started(log, "echo x > made", d) == ["find", "split", "split", "stat"]
    # the sandbox's own mode comes through the change list
    assert started(log, "chmod 754 made", d) == ["find", "split", "split", "stat"]
    assert os.stat(d / "workspace" / "made").st_mode & 0o777 == 0o754


def test_long_output_moves_into_a_directory_deleted_at_once(logged):
    d, srv, log = logged
    started(log, "true", d)
    assert started(log, "head -c 2500000 /dev/zero", d) == \
        ["find", "mkdir", "mv", "split", "split"]
    assert (d / "stdout").read_bytes() == b"\0" * 2500000
    assert sbx.mount_files_left(srv.url) == []
