"""Symbolic links in the workspace (DESIGN.md §3, README "Links"). The
contract's listing cannot tell a link from a file: the mount remembers the
links made through it (journaled, made in the sandbox by "ln -s") and
those a command made (its change list carries their targets). Every
result is checked on the server too, through POST /execute."""
import errno
import os
import stat
import subprocess

import pytest

from conftest import sandbox_url
import mount
import sbx

sh = mount.sh


def ctl(d, command):
    q = "'" + command.replace("'", "'\\''") + "'"
    p = sh(f"echo {q} > {d}/ctl")
    assert p.returncode == 0, p.stderr
    assert mount.read(d / "exit") == "0\n", mount.read(d / "stderr")


def on_server(orch, sid, command):
    """Runs command in the sandbox behind the mount's back: its stdout."""
    r = sbx.execute(sandbox_url(orch, sid), command)
    assert r.status == 200, r.status
    return r.json()


def server_links(orch, sid, top="."):
    """NAME -> TARGET of every link under top, as the sandbox has them."""
    out = on_server(orch, sid, f"cd {top} && find . -type l -exec sh -c "
                    "'for f; do printf \"%s\\t%s\\n\" \"$f\" \"$(readlink \"$f\")\"; done' sh {} +")
    assert out["exitCode"] == 0, out
    return dict(line.split("\t", 1) for line in out["stdout"].splitlines())


def test_ln_s_reads_back_at_once_and_is_a_link_on_the_server(sandbox, orch):
    ws = sandbox / "workspace"
    (ws / "target.txt").write_text("hello\n")
    sh(f"cd {ws} && ln -s target.txt link && ln -s 'no such/place' 'dangling one'",
       check=True)
    assert os.readlink(ws / "link") == "target.txt"
    st = os.lstat(ws / "link")
    assert stat.S_ISLNK(st.st_mode) and st.st_size == len("target.txt")
    assert (ws / "link").read_text() == "hello\n"  # followed here, by the kernel
    assert os.readlink(ws / "dangling one") == "no such/place"
    out = sh(f"ls -l {ws}", check=True).stdout
    assert "link -> target.txt" in out and "dangling one -> no such/place" in out, out
    assert server_links(orch, "sbx1") == {"./link": "target.txt",
                                          "./dangling one": "no such/place"}
    # a second link at the same name is refused, as anywhere
    p = sh(f"ln -s other {ws}/link")
    assert p.returncode != 0 and "exists" in p.stderr
    assert on_server(orch, "sbx1", "cat link")["stdout"] == "hello\n"


def test_a_link_a_command_made_shows_with_its_target(sandbox, orch):
    d, ws = sandbox, sandbox / "workspace"
    os.listdir(ws)  # a listing cached before the command
    ctl(d, "mkdir -p sub && echo data > sub/file && ln -s sub/file 'a link' && ln -s sub dirlink")
    assert os.readlink(ws / "a link") == "sub/file"
    assert os.readlink(ws / "dirlink") == "sub"
    out = sh(f"ls -l {ws}", check=True).stdout
    assert "a link -> sub/file" in out and "dirlink -> sub" in out, out
    assert (ws / "a link").read_text() == "data\n"
    assert os.listdir(ws / "dirlink") == ["file"]
    # still links after the listing is fetched again
    ctl(d, "true")
    assert stat.S_ISLNK(os.lstat(ws / "a link").st_mode)
    # a command that replaces a link with a file: no longer a link
    ctl(d, "rm 'a link' && echo plain > 'a link'")
    st = os.lstat(ws / "a link")
    assert stat.S_ISREG(st.st_mode), oct(st.st_mode)
    assert (ws / "a link").read_text() == "plain\n"


def test_unlink_of_a_link_to_a_directory_keeps_the_directory(sandbox, orch):
    d, ws = sandbox, sandbox / "workspace"
    os.mkdir(ws / "tree")
    (ws / "tree" / "keep.txt").write_text("keep\n")
    os.symlink("tree", ws / "mine")
    ctl(d, "ln -s tree theirs")
    os.unlink(ws / "mine")
    os.unlink(ws / "theirs")
    assert sorted(os.listdir(ws)) == ["tree"]
    out = on_server(orch, "sbx1", "test -f tree/keep.txt && ls")
    assert out["exitCode"] == 0 and out["stdout"].split() == ["tree"], out
    assert server_links(orch, "sbx1") == {}
    assert not any("/files/mine" in c or "/files/theirs" in c for c in sbx.executed(orch, "sbx1")
                   if c)


def test_rename_of_a_link(sandbox, orch):
    ws = sandbox / "workspace"
    (ws / "f").write_text("x\n")
    os.symlink("f", ws / "a")
    os.rename(ws / "a", ws / "b")
    assert os.readlink(ws / "b") == "f"
    assert not os.path.lexists(ws / "a")
    # over an existing link, and a file over a link
    os.symlink("elsewhere", ws / "c")
    os.rename(ws / "b", ws / "c")
    assert os.readlink(ws / "c") == "f"
    os.symlink("f", ws / "d")
    (ws / "new").write_text("new\n")
    os.rename(ws / "new", ws / "d")
    assert stat.S_ISREG(os.lstat(ws / "d").st_mode)
    assert server_links(orch, "sbx1") == {"./c": "f"}
    assert on_server(orch, "sbx1", "cat d f")["stdout"] == "new\nx\n"


def test_links_survive_a_remount(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        d = m.path("sbx2")
        os.mkdir(d)
        os.symlink("made/here", d / "workspace" / "mine")
        ctl(d, "ln -s made/there theirs")
        assert os.readlink(d / "workspace" / "theirs") == "made/there"
    finally:
        m.stop()
    m2 = mount.Mount(tmp_path, server=orch).start()
    try:
        ws = m2.path("sbx2", "workspace")
        assert os.readlink(ws / "mine") == "made/here"
        assert os.readlink(ws / "theirs") == "made/there"
        assert "theirs -> made/there" in sh(f"ls -l {ws}", check=True).stdout
    finally:
        m2.stop()
    m2.check_log()


def test_hard_links_are_eperm(sandbox):
    ws = sandbox / "workspace"
    (ws / "f").write_text("x\n")
    with pytest.raises(OSError) as e:
        os.link(ws / "f", ws / "g")
    assert e.value.errno == errno.EPERM
    assert not os.path.lexists(ws / "g")


def test_tar_x_of_usr_include_keeps_every_link(sandbox, orch, tmp_path):
    """Done-when of the issue: tar x of /usr/include through the mount, with
    every symlink intact on the server."""
    if not os.path.isdir("/usr/include"):
        pytest.skip("no /usr/include")
    expected = {}
    for root, dirs, files in os.walk("/usr/include"):
        for n in dirs + files:
            p = os.path.join(root, n)
            if os.path.islink(p):
                expected["./" + os.path.relpath(p, "/usr")] = os.readlink(p)
    assert expected, "no links in /usr/include"
    ws = sandbox / "workspace"
    p = subprocess.run(f"tar -C /usr -cf - include | tar -C {ws} -xf -", shell=True,
                       capture_output=True, text=True, timeout=850)
    assert p.returncode == 0, p.stderr[-2000:]
    assert server_links(orch, "sbx1") == expected
    for name, target in expected.items():
        assert os.readlink(ws / name) == target
    # and the files came with them
    out = on_server(orch, "sbx1", "find include -type f | wc -l")
    local = sum(1 for r, _, fs in os.walk("/usr/include") for f in fs
                if not os.path.islink(os.path.join(r, f)))
    assert int(out["stdout"]) == local


def test_a_link_a_command_made_out_of_the_workspace_is_never_followed_here(sandbox, orch):
    """The kernel follows a link on this machine: a link the sandbox made to
    /etc/... or up into the mount (../ctl, another sandbox's ctl) would send
    a reader to a local file, or a writer's bytes into a ctl that runs them.
    Such links are what the contract's /files makes of them; the mount's
    own links keep their targets."""
    ws = sandbox / "workspace"
    ctl(sandbox, "mkdir -p sub && printf in > sub/f && echo secret > /tmp/sfs-outside && "
                 "ln -s /tmp/sfs-outside abs && ln -s ../ctl up && "
                 "ln -s ../../ctl sub/up2 && ln -s sub/f inside && ln -s ../sub/f sub/back")
    assert os.readlink(ws / "inside") == "sub/f"
    assert os.readlink(ws / "sub" / "back") == "../sub/f"
    assert (ws / "inside").read_text() == "in"
    for name in ("abs", "up", "sub/up2"):
        st = os.lstat(ws / name)
        assert not stat.S_ISLNK(st.st_mode), name
        with pytest.raises(OSError) as e:
            os.readlink(ws / name)
        assert e.value.errno == errno.EINVAL
    # the server's /files refuses a path that leads out of the workspace:
    # a read through the mount gets an error, never the local file
    for name in ("abs", "up"):
        r = sbx.get(sandbox_url(orch, "sbx1"), name)
        assert r.status != 200, (name, r.status)
        with pytest.raises(OSError):
            (ws / name).read_bytes()
    # a write to it never reaches a ctl: no command runs
    last = mount.read(sandbox / "last")
    sh(f"echo 'touch /tmp/sfs-ran' > {ws}/up")
    assert mount.read(sandbox / "last") == last
    assert on_server(orch, "sbx1", "test -e /tmp/sfs-ran; echo $?")["stdout"] == "1\n"
    # what the write made of "up" is the server's PUT's business (this one
    # puts a file in the link's place); the other links are untouched
    links = server_links(orch, "sbx1")
    assert links["./abs"] == "/tmp/sfs-outside" and links["./sub/up2"] == "../../ctl"
    # a link made through the mount is the user's own: a link, whatever its target
    os.symlink("/tmp/sfs-outside", ws / "mine")
    assert os.readlink(ws / "mine") == "/tmp/sfs-outside"
    ctl(sandbox, "true")
    assert os.readlink(ws / "mine") == "/tmp/sfs-outside"
    on_server(orch, "sbx1", "rm -f /tmp/sfs-outside /tmp/sfs-ran")
