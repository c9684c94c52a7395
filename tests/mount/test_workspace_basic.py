"""ID/workspace/ through the mount with ordinary shell tools (DESIGN.md §3).

Every result is checked on the server side, through the contract (GET,
listing) of the sandbox, never through the mount.
"""
import errno
import os
import subprocess
import time

import pytest

from conftest import sandbox_url
import mount
import sbx

sh = mount.sh


@pytest.fixture
def ws(sandbox):
    return sandbox / "workspace"


@pytest.fixture
def url(orch, sandbox):
    return sandbox_url(orch, "sbx1")


def sget(url, path):
    r = sbx.get(url, path)
    return r.body if r.status == 200 else None


def names(url, path=""):
    r = sbx.list_dir(url, path)
    assert r.status == 200, r.status
    return sorted(e["name"] for e in r.json()["entries"])


def test_echo_cat_append_truncate(ws, url):
    p = sh(f"cd {ws} && echo hello > a.txt && echo more >> a.txt && cat a.txt")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hello\nmore\n"
    assert sget(url, "a.txt") == b"hello\nmore\n"
    assert sh(f"truncate -s 3 {ws}/a.txt").returncode == 0
    assert sget(url, "a.txt") == b"hel"
    assert os.stat(ws / "a.txt").st_size == 3
    assert sh(f"printf xy > {ws}/a.txt").returncode == 0
    assert sget(url, "a.txt") == b"xy"
    assert os.stat(ws / "a.txt").st_size == 2


def test_server_side_change_after_command(ws, url, sandbox):
    sbx.put(url, "s.txt", b"v1")
    assert (ws / "s.txt").read_bytes() == b"v1"
    p = sh(f"echo 'printf v2 > s.txt' > {sandbox}/ctl")
    assert p.returncode == 0, p.stderr
    assert (ws / "s.txt").read_bytes() == b"v2"
    p = sh(f"echo 'printf longer-now > s.txt' > {sandbox}/ctl")
    assert os.stat(ws / "s.txt").st_size == 10
    assert (ws / "s.txt").read_bytes() == b"longer-now"


def test_ls_l_costs_one_listing(ws, url):
    for i in range(30):
        sbx.put(url, f"d/f{i:02}", b"x" * i)
    s0 = sbx.stats(url)
    p = sh(f"ls -l {ws}/d && find {ws}/d -type f | wc -l && du -s {ws}/d")
    assert p.returncode == 0, p.stderr
    s1 = sbx.stats(url)
    assert s1["lists"] - s0["lists"] <= 2  # d, and the root for its lookup
    assert s1["gets"] - s0["gets"] == 0  # no file is read for metadata
    assert "30\n" in p.stdout
    assert os.stat(ws / "d" / "f07").st_size == 7
    # A tree: one listing per directory, whatever the number of entries.
    for sub in ("t/a", "t/a/b", "t/c"):
        for i in range(10):
            sbx.put(url, f"{sub}/g{i}", b"y")
    time.sleep(1.2)  # made behind the mount's back: seen once the listing expires
    s0 = sbx.stats(url)
    p = sh(f"find {ws}/t -type f | wc -l")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "30\n"
    s1 = sbx.stats(url)
    assert s1["lists"] - s0["lists"] == 5  # the root again, t, t/a, t/a/b, t/c
    p = sh(f"ls -lR {ws}/t > /dev/null && du -a {ws}/t | wc -l")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "34\n"
    s2 = sbx.stats(url)
    assert s2["lists"] - s1["lists"] <= 5  # at most once more, when the cache expired
    assert s2["gets"] == s0["gets"]


def test_mkdir_rmdir_rename_unlink(ws, url):
    os.mkdir(ws / "dir")
    assert "dir" in names(url)
    assert names(url, "dir") == []
    (ws / "dir" / "f").write_text("f")
    with pytest.raises(OSError) as e:
        os.rmdir(ws / "dir")
    assert e.value.errno == errno.ENOTEMPTY
    os.rename(ws / "dir" / "f", ws / "g")
    assert sget(url, "g") == b"f" and sget(url, "dir/f") is None
    os.rmdir(ws / "dir")
    assert "dir" not in names(url)
    os.unlink(ws / "g")
    assert sget(url, "g") is None
    assert not (ws / "g").exists()


def test_rename_directory(ws, url):
    os.makedirs(ws / "t1" / "sub")
    (ws / "t1" / "sub" / "x").write_text("x")
    os.rename(ws / "t1", ws / "t2")
    assert sget(url, "t2/sub/x") == b"x"
    assert "t1" not in names(url)
    assert (ws / "t2" / "sub" / "x").read_text() == "x"


def test_open_file_survives_unlink_and_rename(ws, url):
    with open(ws / "o.txt", "w+") as f:
        f.write("abc")
        f.flush()
        os.fsync(f.fileno())
        assert sget(url, "o.txt") == b"abc"
        os.rename(ws / "o.txt", ws / "p.txt")
        f.write("def")
    assert sget(url, "p.txt") == b"abcdef"
    assert sget(url, "o.txt") is None
    with open(ws / "p.txt") as f:
        os.unlink(ws / "p.txt")
        assert f.read() == "abcdef"
    assert sget(url, "p.txt") is None


def test_an_unlinked_open_file_answers_stat_and_seek_from_its_descriptor(ws, url, mnt):
    """After unlink the name is gone: once its cached attributes expire the
    kernel asks for them by inode (fstat) or by handle (a seek to the end),
    and both are answered from the descriptor's own file, as on a local
    disk (the open-then-unlink temporary file)."""
    fd = os.open(ws / "gone.txt", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.write(fd, b"12345") == 5
        os.fsync(fd)
        os.unlink(ws / "gone.txt")
        assert sget(url, "gone.txt") is None
        time.sleep(1.5)  # past attr_timeout (1 s): the kernel asks again
        assert os.fstat(fd).st_size == 5
        time.sleep(1.5)
        assert os.lseek(fd, 0, os.SEEK_END) == 5
        assert os.fstat(fd).st_size == 5
        assert os.pread(fd, 16, 0) == b"12345"
        assert os.write(fd, b"678") == 3
        assert os.lseek(fd, 0, os.SEEK_END) == 8
        assert os.fstat(fd).st_size == 8
        os.ftruncate(fd, 2)
        assert os.fstat(fd).st_size == 2
        assert os.pread(fd, 16, 0) == b"12"
    finally:
        os.close(fd)
    assert mnt.proc.poll() is None  # the daemon is still there
    assert sget(url, "gone.txt") is None
    assert "gone.txt" not in os.listdir(ws)
    # Python's TemporaryFile in the workspace (O_TMPFILE is refused, so an
    # open then an unlink), read back after its attributes expired
    import tempfile
    with tempfile.TemporaryFile(dir=ws) as f:
        f.write(b"abc")
        f.flush()
        time.sleep(1.5)
        assert os.fstat(f.fileno()).st_size == 3
        f.seek(0)
        assert f.read() == b"abc"
    assert [n for n in os.listdir(ws) if n.startswith("tmp")] == []


def test_chmod_reaches_the_sandbox_before_the_next_command(ws, sandbox):
    (ws / "run.sh").write_text("#!/bin/sh\necho ran\n")
    p = sh(f"chmod +x {ws}/run.sh && echo ./run.sh > {sandbox}/ctl && cat {sandbox}/stdout")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "ran\n"
    assert os.stat(ws / "run.sh").st_mode & 0o777 == 0o755


def test_names_and_machinery(ws, url, orch):
    p = sh(f"touch {ws}/{'x' * 256}")
    assert p.returncode != 0 and "File name too long" in p.stderr
    p = sh(f"touch {ws}/$'bad\\x01name'")
    assert p.returncode != 0
    listing = os.listdir(ws)
    for hidden in (".pool", ".sandbox-agent", ".pool-exec.fifo", ".pool-shim.log"):
        assert hidden not in listing


def test_df_and_stat(ws):
    p = sh(f"df {ws} && stat -f -c %l {ws}")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("255")
    # df of the mount itself reports the same local filesystem, not zeros.
    root = ws.parent.parent
    mine, top = os.statvfs(ws), os.statvfs(root)
    assert top.f_blocks > 0 and top.f_blocks == mine.f_blocks
    # The workspace root has a time of this mount, not 1970.
    assert os.stat(ws).st_mtime > time.time() - 3600


def test_no_stale_size_after_command_or_write(ws, url, sandbox):
    sbx.put(url, "n.txt", b"ab")
    assert os.stat(ws / "n.txt").st_size == 2  # known to the kernel, never read
    p = sh(f"echo 'printf 0123456789 > n.txt' > {sandbox}/ctl && stat -c %s {ws}/n.txt "
           f"&& cat {ws}/n.txt")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "10\n0123456789"
    p = sh(f"printf abc >> {ws}/n.txt && stat -c %s {ws}/n.txt && ls -l {ws} | grep -c ' 13 '")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "13\n1\n"
    assert sget(url, "n.txt") == b"0123456789abc"


def test_rename_while_a_command_runs(ws, url, sandbox):
    (ws / "x.txt").write_text("x")
    os.mkdir(ws / "dd")
    running = subprocess.Popen(["bash", "-c", f"echo 'sleep 3' > {sandbox}/ctl"])
    try:
        assert sbx.wait_for(lambda: mount.read(sandbox / "status") == "running\n", timeout=10)
        os.rename(ws / "x.txt", ws / "y.txt")  # file: no command needed
        assert sget(url, "y.txt") == b"x" and sget(url, "x.txt") is None
        with pytest.raises(OSError) as e:  # directory: needs the seat
            os.rename(ws / "dd", ws / "ee")
        assert e.value.errno == errno.EBUSY
        assert "dd" in names(url)
    finally:
        assert running.wait(30) == 0
    os.rename(ws / "dd", ws / "ee")
    assert "ee" in names(url) and "dd" not in names(url)


def test_parallel_writers_and_listers(ws, url):
    script = f"""set -e
for w in 1 2 3 4 5 6; do
  ( mkdir -p {ws}/p$w
    for i in $(seq 1 40); do
      printf "w$w i$i\\n" > {ws}/p$w/f$i.tmp
      mv {ws}/p$w/f$i.tmp {ws}/p$w/f$i
      printf "more\\n" >> {ws}/p$w/f$i
    done ) &
done
# names vanish under ls as they would on any filesystem: only no hang
for k in 1 2 3 4 5; do ls -lR {ws} > /dev/null 2>&1 || true; done
wait
"""
    p = sh(script, timeout=120)
    assert p.returncode == 0, p.stderr
    for w in range(1, 7):
        assert names(url, f"p{w}") == sorted(f"f{i}" for i in range(1, 41))
        assert sget(url, f"p{w}/f17") == f"w{w} i17\nmore\n".encode()
    p = sh(f"cat {ws}/p3/f40")
    assert p.stdout == "w3 i40\nmore\n"


def test_open_reader_sees_command_changes(ws, url, sandbox):
    sbx.put(url, "r.txt", b"old!")
    with open(ws / "r.txt", "rb") as held:
        assert held.read() == b"old!"
        assert sh(f"echo 'printf new! > r.txt' > {sandbox}/ctl").returncode == 0
        assert (ws / "r.txt").read_bytes() == b"new!"
        assert sh(f"echo 'printf longer > r.txt' > {sandbox}/ctl").returncode == 0
        assert os.stat(ws / "r.txt").st_size == 6
        assert (ws / "r.txt").read_bytes() == b"longer"
        assert sh(f"echo 'rm r.txt' > {sandbox}/ctl").returncode == 0
        assert not (ws / "r.txt").exists()
    (ws / "r.txt").write_bytes(b"again")
    assert sget(url, "r.txt") == b"again"


def test_one_put_per_redirect_and_commands_see_open_files(ws, url, sandbox):
    sbx.put(url, "r.txt", b"old content")
    os.stat(ws / "r.txt")
    s0 = sbx.stats(url)
    # The shell's "> file" closes a dup of the descriptor before writing:
    # still exactly one PUT, and the server never holds an empty file.
    assert sh(f"printf new > {ws}/r.txt").returncode == 0
    assert sbx.stats(url)["puts"] - s0["puts"] == 1
    assert sget(url, "r.txt") == b"new"
    # A command sees an empty file just created, and what an open
    # descriptor wrote so far.
    p = sh(f"touch {ws}/marker && exec 3>{ws}/open.txt && echo partial >&3 && "
           f"echo 'ls marker && cat open.txt' > {sandbox}/ctl && cat {sandbox}/stdout")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "marker\npartial\n"
    assert sbx.wait_for(lambda: sget(url, "marker") == b"", timeout=5)
