"""Failures before the mount say what to do next (issue 7): each prints ONE
line naming the cause and the fix, exits non-zero and mounts nothing.

A damaged journal is covered by test_restart.py, which checks its line
names -o repair_journal."""
import os
import shutil
import subprocess

import pytest

import mount


def fails_with_one_line(m, *words):
    rc, out = m.run_daemon()
    lines = out.strip().splitlines()
    assert rc != 0, out
    assert len(lines) == 1, out
    for w in words:
        assert w in lines[0], (w, out)
    assert not mount.is_mounted(m.mnt)
    for s in m.secrets:
        assert s not in out
    return lines[0]


def test_missing_mountpoint(tmp_path):
    m = mount.Mount(tmp_path, local=True)
    m.mnt = tmp_path / "missing"
    argv = m.command()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    line = p.stderr.strip()
    assert p.returncode != 0 and "\n" not in line, p.stderr
    assert "does not exist" in line and f"mkdir -p {m.mnt}" in line
    assert not m.mnt.exists()


def test_mountpoint_not_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    m = mount.Mount(tmp_path, local=True, mountpoint=f)
    p = subprocess.run(m.command(), capture_output=True, text=True, timeout=20)
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "not a directory" in p.stderr


def test_non_empty_mountpoint_is_refused_unless_nonempty(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    m.mnt.mkdir()
    (m.mnt / "precious.txt").write_text("mine\n")
    fails_with_one_line(m, "is not empty", "-o nonempty")
    m2 = mount.Mount(tmp_path, server=orch, opts=["nonempty"])
    with m2:
        os.mkdir(m2.path("ne"))
        assert "precious.txt" not in os.listdir(m2.mnt)
    m2.check_log()
    assert (m.mnt / "precious.txt").read_text() == "mine\n"


def test_unreachable_orchestrator(tmp_path):
    m = mount.Mount(tmp_path, opts=["orchestrator=http://127.0.0.1:1"])
    fails_with_one_line(m, "orchestrator unreachable", "orchestrator=URL")


def test_bad_token(tmp_path, orch):
    bad = tmp_path / "bad-token"
    bad.write_text("not-the-token\n")
    bad.chmod(0o600)  # private, so that the orchestrator is what refuses it
    m = mount.Mount(tmp_path, opts=[f"orchestrator={orch.url}", f"token_file={bad}"])
    m.secrets.append(orch.token)
    fails_with_one_line(m, "refused the token", "token_file=")


def test_missing_token(tmp_path, orch):
    m = mount.Mount(tmp_path, opts=[f"orchestrator={orch.url}"],
                    env={"SANDBOXFS_TOKEN": ""})
    fails_with_one_line(m, "refused the token", "token_file=")


def in_namespace(tmp_path, setup):
    """Runs the daemon for a mount in a private mount namespace prepared by
    the shell lines `setup`; returns (exit code, output)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private mount namespace")
    m = mount.Mount(tmp_path, local=True)
    m.mnt.mkdir()
    argv = " ".join(f"'{a}'" for a in m.command())
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c",
                        f"set -e; {setup}; exec {argv}"],
                       capture_output=True, text=True, timeout=30)
    assert not mount.is_mounted(m.mnt)
    return p.returncode, p.stdout + p.stderr


def test_missing_dev_fuse(tmp_path):
    # /dev/null in place of /dev/fuse: not the FUSE device
    rc, out = in_namespace(tmp_path, "mount --bind /dev/null /dev/fuse")
    assert rc != 0 and len(out.strip().splitlines()) == 1, out
    assert "not the FUSE device" in out and "--device /dev/fuse" in out, out
    # nothing was started: no local server, no journal
    assert not (tmp_path / "state" / "local.pid").exists()


def test_no_dev_fuse_at_all(tmp_path):
    # an empty /dev, as in a container started without the device
    rc, out = in_namespace(tmp_path, "mount -t tmpfs tmpfs /dev")
    assert rc != 0 and len(out.strip().splitlines()) == 1, out
    assert "/dev/fuse is missing" in out and "modprobe fuse" in out, out


def test_missing_fusermount3(tmp_path):
    fm = shutil.which("fusermount3")
    setup = ("for f in /usr/bin/fusermount3 /bin/fusermount3 " + (fm or "") +
             "; do [ -e $f ] && mount --bind /dev/null $f || true; done; "
             "export PATH=/usr/sbin:/sbin")
    rc, out = in_namespace(tmp_path, setup)
    assert rc != 0 and len(out.strip().splitlines()) == 1, out
    assert "fusermount3 not found" in out and "apt-get install fuse3" in out, out
    assert not (tmp_path / "state" / "local.pid").exists()


def test_mounting_twice(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    with m:
        again = mount.Mount(tmp_path / "again", server=orch, mountpoint=m.mnt)
        (tmp_path / "again").mkdir()
        p = subprocess.run(again.command(), capture_output=True, text=True, timeout=20)
        rc, out = p.returncode, p.stdout + p.stderr
        assert rc != 0 and len(out.strip().splitlines()) == 1, out
        assert "already a mount point" in out and f"fusermount3 -u {m.mnt}" in out, out
        assert os.listdir(m.mnt) == [".sandboxfs"]  # the first mount is untouched
    m.check_log()


def test_dead_mount_left_by_a_crash(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["no_auto_unmount"]).start()
    try:
        m.proc.kill()  # no auto_unmount: the mount stays, dead
        m.proc.wait(10)
        m.proc = None
        again = mount.Mount(tmp_path / "again", server=orch, mountpoint=m.mnt)
        (tmp_path / "again").mkdir()
        p = subprocess.run(again.command(), capture_output=True, text=True, timeout=20)
        out = p.stdout + p.stderr
        assert p.returncode != 0 and len(out.strip().splitlines()) == 1, out
        assert "dead FUSE mount" in out and f"fusermount3 -u {m.mnt}" in out, out
    finally:
        subprocess.run([mount.FUSERMOUNT, "-u", "-z", str(m.mnt)], capture_output=True,
                       timeout=20)
        m.stop()
    assert not mount.is_mounted(m.mnt)


def test_source_argument_usage(tmp_path):
    """SOURCE (what mount.fuse3 passes first): an orchestrator given twice,
    or a third positional argument, is a usage error of one line."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    sfs = str(mount.sandboxfs_binary())
    for argv, words in (
            ([sfs, "http://127.0.0.1:1", str(mnt), "-o", "orchestrator=http://127.0.0.1:2"],
             ("both name an orchestrator",)),
            ([sfs, "local", str(mnt), str(mnt)], ("unexpected argument", "[SOURCE] MOUNTPOINT"))):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        for w in words:
            assert w in p.stderr, p.stderr
        assert not mount.is_mounted(mnt)
