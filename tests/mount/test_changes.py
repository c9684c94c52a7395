"""What a command changed is visible to stat (DESIGN.md §2, §3): the
listing has no times or modes, so after each command its own shell lists
what changed (find -newer, stat -c) and those files show the sandbox's
mtime and mode. Checked with real git, make and rsync, which compare sizes
and times, on a change of the same size."""
import os
import shutil
import time

import pytest

from conftest import sandbox_url
import mount
import sbx

sh = mount.sh

pytestmark = pytest.mark.skipif(not all(shutil.which(t) for t in ("git", "make", "rsync")),
                                reason="needs git, make and rsync")


def ctl(d, command):
    q = "'" + command.replace("'", "'\\''") + "'"
    p = sh(f"echo {q} > {d}/ctl")
    assert p.returncode == 0, p.stderr
    assert mount.read(d / "exit") == "0\n", mount.read(d / "stderr")


def test_git_status_sees_a_same_size_change_a_command_made(sandbox, orch):
    d, ws = sandbox, sandbox / "workspace"
    git = "git -c user.email=t@example.com -c user.name=t"
    sh(f"cd {ws} && {git} init -q . && echo aaaa > f.txt && {git} add f.txt && "
       f"{git} commit -qm one", check=True, timeout=60)
    assert sh(f"cd {ws} && git status --short", check=True, timeout=60).stdout == ""
    time.sleep(2)
    ctl(d, "echo bbbb > f.txt")
    assert sbx.get(sandbox_url(orch, "sbx1"), "f.txt").body == b"bbbb\n"
    st = sh(f"cd {ws} && git status --short", check=True, timeout=60).stdout
    assert st == " M f.txt\n", st


def test_make_rebuilds_after_a_same_size_change_a_command_made(sandbox, orch):
    d, ws = sandbox, sandbox / "workspace"
    (ws / "Makefile").write_text("out: in\n\tcp in out\n")
    (ws / "in").write_text("aaaa\n")
    assert "cp in out" in sh(f"make -C {ws}", check=True).stdout
    assert "up to date" in sh(f"make -C {ws}", check=True).stdout
    time.sleep(1.2)
    ctl(d, "echo bbbb > in")
    out = sh(f"make -C {ws}", check=True).stdout
    assert "cp in out" in out, out
    assert (ws / "out").read_text() == "bbbb\n"


def test_rsync_quick_check_sees_a_same_size_change_a_command_made(sandbox, orch, tmp_path):
    d, ws = sandbox, sandbox / "workspace"
    (ws / "data.txt").write_text("aaaa\n")
    dst = tmp_path / "copy"
    sh(f"rsync -a {ws}/ {dst}/", check=True, timeout=60)
    assert (dst / "data.txt").read_text() == "aaaa\n"
    time.sleep(1.2)
    ctl(d, "echo bbbb > data.txt")
    sh(f"rsync -a {ws}/ {dst}/", check=True, timeout=60)
    assert (dst / "data.txt").read_text() == "bbbb\n"


def test_modes_and_times_a_command_set_show_at_once(sandbox, orch):
    d, ws = sandbox, sandbox / "workspace"
    ctl(d, "mkdir -p bin && printf '#!/bin/sh\\necho ran\\n' > bin/tool && chmod 750 bin/tool"
           " && touch -d @1600000000 old.txt")
    st = os.stat(ws / "bin" / "tool")
    assert st.st_mode & 0o7777 == 0o750
    assert os.access(ws / "bin" / "tool", os.X_OK)
    assert os.stat(ws / "old.txt").st_mtime == 1600000000
    # the machinery the command's shell used is never shown
    assert not [n for n in os.listdir(ws) if n.startswith(".sandboxfs-")]


def test_a_chmod_or_touch_alone_shows_too(sandbox, orch):
    """Neither moves a file's modification time past the mark: GNU find's
    -cnewer (the change time) lists them all the same."""
    d, ws = sandbox, sandbox / "workspace"
    ctl(d, "echo a > a.sh && echo b > b.txt")
    assert os.stat(ws / "a.sh").st_mode & 0o777 == 0o644
    time.sleep(1.2)
    ctl(d, "chmod 755 a.sh && touch -d @1500000000 b.txt")
    assert os.stat(ws / "a.sh").st_mode & 0o777 == 0o755
    assert os.stat(ws / "b.txt").st_mtime == 1500000000


def test_with_stream_no_too(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["stream=no"]).start()
    try:
        os.mkdir(m.path("ns"))
        d, ws = m.path("ns"), m.path("ns", "workspace")
        (ws / "data.txt").write_text("aaaa\n")
        st0 = os.stat(ws / "data.txt")
        time.sleep(1.2)
        ctl(d, "echo bbbb > data.txt && chmod 700 data.txt")
        st = os.stat(ws / "data.txt")
        assert st.st_size == st0.st_size and st.st_mtime > st0.st_mtime
        assert st.st_mode & 0o7777 == 0o700
        assert mount.read(d / "stdout") == ""  # the listing is not the user's output
    finally:
        m.stop()
