"""A sandbox whose only tools are BusyBox's (Debian's build, without
`split`): the wrappers a command is sent in (env, cwd, stdin, the list of
what it changed with `find -newer` and `stat -c`, link targets with
`readlink`) use only what BusyBox has, and streaming, which needs `split`,
falls back to the plain /execute. Checked on the server through the
contract."""
import os
import shutil
import stat
import subprocess
import time

import pytest

import mount
import sbx

sh = mount.sh

BUSYBOX = shutil.which("busybox")
pytestmark = pytest.mark.skipif(BUSYBOX is None, reason="busybox is not installed "
                                "(setup.sh installs it)")


@pytest.fixture
def bb(tmp_path, mnt):
    """A sandbox served with BusyBox's sh and applets only, attached."""
    tools = tmp_path / "busybox-bin"
    tools.mkdir()
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        os.symlink(BUSYBOX, tools / a)
    assert not (tools / "split").exists()  # what streaming needs is not there
    with sbx.Server(tmp=None, faults=True, shell=str(tools / "sh"),
                    env={"PATH": str(tools)}) as srv:
        mnt.secrets.append(srv.url)
        with open(mnt.path(".sandboxfs", "ctl"), "w") as f:
            f.write(f"attach bb {srv.url}\n")
        yield mnt.path("bb"), srv


def run(d, command):
    q = "'" + command.replace("'", "'\\''") + "'"
    p = sh(f"echo {q} > {d}/ctl")
    assert p.returncode == 0, p.stderr
    return mount.read(d / "exit")


def test_commands_changes_links_and_env_with_busybox_only(bb):
    d, srv = bb
    ws = d / "workspace"
    # the shell is BusyBox's, and a command without split runs plainly
    assert run(d, "readlink /proc/$$/exe; echo out; echo err >&2; exit 3") == "3\n"
    assert mount.read(d / "stdout").splitlines()[1:] == ["out"]
    assert "busybox" in mount.read(d / "stdout").splitlines()[0]
    assert mount.read(d / "stderr") == "err\n"
    # what a command changed: a same-size rewrite and a mode show at once
    assert run(d, "printf aaaa > f.txt") == "0\n"
    before = os.stat(ws / "f.txt")
    time.sleep(1.1)
    assert run(d, "printf bbbb > f.txt && printf '#!/bin/sh\\n' > x.sh && chmod 755 x.sh") \
        == "0\n"
    after = os.stat(ws / "f.txt")
    assert after.st_size == before.st_size and after.st_mtime > before.st_mtime
    assert stat.S_IMODE(os.stat(ws / "x.sh").st_mode) == 0o755
    assert sbx.get(srv.url, "f.txt").body == b"bbbb"
    # a link a command made, with its target, from BusyBox's readlink, in the same
    # second as the previous command's end (BusyBox's find compares whole seconds)
    assert run(d, "ln -s f.txt l") == "0\n"
    assert os.readlink(ws / "l") == "f.txt"
    # env, cwd and stdin
    (d / "env").write_text("GREETING=hi there\n")
    os.mkdir(ws / "sub")
    (d / "cwd").write_text("sub\n")
    (d / "stdin").write_bytes(b"pear\napple\n")
    assert run(d, 'echo "$GREETING in ${PWD##*/}"; sort') == "0\n"
    assert mount.read(d / "stdout") == "hi there in sub\napple\npear\n"
    assert mount.read(d / "runs" / str(int(mount.read(d / "last"))) / "command") == \
        'echo "$GREETING in ${PWD##*/}"; sort\n'
    # nothing of the mount's own is left in the workspace
    assert sbx.mount_files_left(srv.url) == []


def test_a_job_without_split_fails_clearly(bb):
    """Jobs keep their output in pieces made by split: where the sandbox has
    none, the spawn fails at the write (EIO) and says why; nothing runs."""
    d, srv = bb
    p = sh(f"echo 'touch started' > {d}/spawn")
    assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
    jobs = os.listdir(d / "jobs")
    assert len(jobs) == 1
    assert mount.read(d / "jobs" / jobs[0] / "status") == "failed\n"
    assert "split" in mount.read(d / "jobs" / jobs[0] / "info")
    assert sbx.get(srv.url, "started").status == 404


def test_no_change_list_is_whole_with_busybox(bb, mnt):
    """BusyBox's find compares modification times in whole seconds: a file
    rewritten with an old time is not in its list, so after every command
    the mount forgets all it holds of the workspace (mount/stream.c)."""
    d, srv = bb
    ws = d / "workspace"
    assert run(d, "printf 'one\\n' > f.txt") == "0\n"
    # past the second in which the root last changed (the marks are dated
    # one second back): the lists after this one do not name the root
    time.sleep(2.1)
    assert run(d, "true") == "0\n"
    assert (ws / "f.txt").read_bytes() == b"one\n"
    assert run(d, "printf 'two\\n' > f.txt && touch -d '2001-01-01 00:00' f.txt") == "0\n"
    assert (ws / "f.txt").read_bytes() == b"two\n"
    assert mnt.stats()["precise_invalidations"] == 0
