"""Renames and uploads do not race, and a descriptor reads one whole
version of a file.

- A directory rename runs `mv` in the sandbox. A file of that directory
  closed while the `mv` is under way is uploaded to its new name once the
  rename is done, never to the old one (which would make the old directory
  again on the server). The server answers the `mv` late (its delay_ms
  fault on execute), so the close falls between the move and its answer.
- A file a command rewrote is downloaded again into a new cache file when
  a descriptor opened before the command is still open: that descriptor
  reads the old content whole while the new one downloads (slowly: the
  server's body_rate_kbps fault), and a new descriptor reads the new
  content whole. Both are checked against the server's copies.
"""
import hashlib
import os
import threading

from conftest import sandbox_url
import mount
import sbx

MiB = 1 << 20


def sha(b):
    return hashlib.sha256(b).hexdigest()


def names(url, path=""):
    r = sbx.list_dir(url, path)
    assert r.status == 200, r.status
    return sorted(e["name"] for e in r.json()["entries"])


def in_thread(fn):
    box = {}

    def run():
        try:
            box["v"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_a_file_closed_during_a_directory_rename_lands_at_the_new_name(mnt, orch):
    os.mkdir(mnt.path("sbx1"))
    ws = mnt.path("sbx1", "workspace")
    url = sandbox_url(orch, "sbx1")
    os.mkdir(ws / "from")
    with open(ws / "from" / "keep.txt", "wb") as f:
        f.write(b"keep\n")
    fd = os.open(ws / "from" / "x", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"first\n")
        # The mv runs at once; its answer comes 4 s later.
        sbx.set_faults(url, delay_ms=4000, routes="execute")
        t, box = in_thread(lambda: os.rename(ws / "from", ws / "to"))
        # The sandbox has moved the directory; the rename is not over.
        assert sbx.wait_for(lambda: names(url) == ["to"], timeout=10), names(url)
        assert t.is_alive()
        os.write(fd, b"second\n")
    finally:
        os.close(fd)  # uploads x
    t.join(30)
    sbx.set_faults(url)
    assert not t.is_alive()
    assert "e" not in box, box.get("e")
    # On the server: to/x with both writes, and no from/ made again.
    assert names(url) == ["to"]
    assert names(url, "to") == ["keep.txt", "x"]
    r = sbx.get(url, "to/x")
    assert r.status == 200 and r.body == b"first\nsecond\n"
    assert sbx.get(url, "from/x").status == 404
    assert mount.read(ws / "to" / "x") == "first\nsecond\n"
    assert sorted(os.listdir(ws)) == ["to"]


def read_whole(fd, size, chunk=256 * 1024):
    """The bytes of fd from offset 0 with pread, until a short read."""
    out = []
    off = 0
    while off < size + chunk:
        b = os.pread(fd, chunk, off)
        out.append(b)
        off += len(b)
        if len(b) < chunk:
            break
    return b"".join(out)


def test_a_descriptor_opened_before_a_command_reads_one_whole_version(tmp_path, orch):
    # The same size: the kernel keeps one size per name, which a version
    # of another size would change under the old descriptor (README).
    new_size = 16 * MiB
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=60000"])
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        ws = m.path("sbx1", "workspace")
        url = sandbox_url(orch, "sbx1")
        old = os.urandom(16 * MiB)
        assert sbx.put(url, "v.bin", old).status == 204
        os.listdir(ws)
        with open(ws / "v.bin", "rb") as f:  # in the cache now
            assert sha(f.read()) == sha(old)
        fd = os.open(ws / "v.bin", os.O_RDONLY)
        try:
            assert os.pread(fd, MiB, 0) == old[:MiB]
            # A command rewrites the file (new bytes).
            cmd = f"head -c {new_size} /dev/urandom > v.tmp && mv v.tmp v.bin"
            p = mount.sh(f"echo '{cmd}' > {m.path('sbx1', 'ctl')}")
            assert p.returncode == 0, p.stderr
            assert mount.read(m.path("sbx1", "exit")) == "0\n"
            new = sbx.get(url, "v.bin").body
            assert len(new) == new_size and new[:MiB] != old[:MiB]
            # The new content comes slowly (4 s and more); a new reader
            # starts it, and the old descriptor reads meanwhile.
            sbx.set_faults(url, body_rate_kbps=4 * 1024, routes="files")

            def read_new():
                with open(ws / "v.bin", "rb") as f:
                    return f.read()

            t, box = in_thread(read_new)
            assert sbx.wait_for(lambda: sbx.stats(url)["active"] >= 1, timeout=10)
            first = read_whole(fd, len(old))
            t.join(60)
            assert not t.is_alive() and "e" not in box, box.get("e")
            second = read_whole(fd, len(old))  # after the download too
        finally:
            os.close(fd)
        sbx.set_faults(url)
        # The old descriptor: one whole version, never a mix or a short read.
        for got in (first, second):
            assert (len(got), sha(got)) in ((len(old), sha(old)), (len(new), sha(new))), \
                (len(got), got[:MiB] == old[:MiB], got[:MiB] == new[:MiB])
        # The new descriptor: the new content, whole.
        assert len(box["v"]) == len(new) and sha(box["v"]) == sha(new)
        with open(ws / "v.bin", "rb") as f:
            assert sha(f.read()) == sha(new)
        assert os.stat(ws / "v.bin").st_size == len(new)
    finally:
        m.stop()
    m.check_log()
