"""Early PUT (issue 17): while a new or truncated file is written in order
from offset 0, its PUT is already on the wire (chunked transfer encoding),
and its close waits only for the tail. Anything else abandons it and the
close makes one PUT of the whole file, as before: a seek back, a
truncate, fsync, a server that takes no chunked body (remembered per
sandbox), a connection dropped mid-PUT. A close never succeeds before
the server answered the PUT that carried every byte.

What is proved is counted, never timed: the mount's .sandboxfs/stats
(early_put_bytes while the descriptor is still open; early_puts_done /
early_puts_abandoned after the close), the server's own stats (puts,
chunked_puts), and its copy of the file through the contract (GET).
"""
import hashlib
import os

import pytest

from conftest import sandbox_url
import mount
import sbx

MiB = 1024 * 1024


def stats(m):
    out = {}
    for line in mount.read(m.path(".sandboxfs", "stats")).splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def stat(m, key):
    return int(stats(m)[key])


def block(i, seed=b"x"):
    """1 MiB that differs from every other block i and seed."""
    return (hashlib.sha256(seed + i.to_bytes(8, "little")).digest() * (MiB // 32))


def on_server(url, path):
    r = sbx.get(url, path)
    assert r.status == 200, r.status
    return r.body


def server_stats(url):
    return sbx.Client(url).stats()


@pytest.fixture
def sb(mnt):
    os.mkdir(mnt.path("sbx1"))
    url = sandbox_url(mnt.server, "sbx1")
    mnt.secrets.append(url)
    return mnt, url, mnt.path("sbx1", "workspace")


def test_a_sequential_write_is_on_the_wire_before_close(sb):
    m, url, ws = sb
    before = server_stats(url)
    fd = os.open(os.path.join(ws, "big.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    h = hashlib.sha256()
    try:
        for i in range(64):
            b = block(i)
            h.update(b)
            assert os.write(fd, b) == MiB
        # Still open: the bytes are already going out, all of them.
        assert stat(m, "early_puts") == 1
        assert sbx.wait_for(lambda: stat(m, "early_put_bytes") == 64 * MiB,
                            timeout=60, interval=0.1), stats(m)
        assert stat(m, "early_puts_running") == 1
        assert stat(m, "early_puts_done") == 0
    finally:
        os.close(fd)
    s = stats(m)
    assert int(s["early_puts_done"]) == 1, s
    assert int(s["early_puts_abandoned"]) == 0, s
    assert int(s["early_put_bytes_before_close"]) == 64 * MiB, s
    assert int(s["early_puts_running"]) == 0, s
    after = server_stats(url)
    # One PUT, and it was the chunked one: no second PUT at close.
    assert after["puts"] - before["puts"] == 1
    assert after["chunked_puts"] - before["chunked_puts"] == 1
    assert hashlib.sha256(on_server(url, "big.bin")).hexdigest() == h.hexdigest()


def test_a_small_file_is_one_put_at_close(sb):
    m, url, ws = sb
    before = server_stats(url)
    data = os.urandom(MiB - 1)
    with open(os.path.join(ws, "small.bin"), "wb") as f:
        f.write(data)
    assert stat(m, "early_puts") == 0
    after = server_stats(url)
    assert after["puts"] - before["puts"] == 1
    assert after["chunked_puts"] == before["chunked_puts"]
    assert on_server(url, "small.bin") == data


def write_then(m, ws, name, what, running=True):
    """8 MiB in order (the early PUT starts), then what breaks the order,
    then 2 MiB more; returns the file's expected content."""
    path = os.path.join(ws, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        content = bytearray()
        for i in range(8):
            content += block(i)
            os.write(fd, block(i))
        if running:
            assert stat(m, "early_puts_running") == 1
        if what == "seek back":
            os.lseek(fd, 3 * MiB, os.SEEK_SET)
            os.write(fd, block(100))
            content[3 * MiB:4 * MiB] = block(100)
            os.lseek(fd, 0, os.SEEK_END)
        elif what == "ftruncate":
            os.ftruncate(fd, 5 * MiB + 7)
            del content[5 * MiB + 7:]
            os.lseek(fd, 0, os.SEEK_END)
        elif what == "fsync":
            os.fsync(fd)
        for i in range(2):
            content += block(200 + i)
            os.write(fd, block(200 + i))
    finally:
        os.close(fd)
    return bytes(content)


@pytest.mark.parametrize("what", ["seek back", "ftruncate", "fsync"])
def test_what_breaks_the_order_falls_back_to_one_put_at_close(sb, what):
    m, url, ws = sb
    before = server_stats(url)
    content = write_then(m, ws, "f.bin", what)
    s = stats(m)
    assert int(s["early_puts"]) == 1, s
    assert int(s["early_puts_done"]) == 0, s
    assert int(s["early_puts_abandoned"]) == 1, s
    after = server_stats(url)
    assert after["chunked_puts"] == before["chunked_puts"]
    # fsync's own PUT, then the close's; else only the close's.
    assert after["puts"] - before["puts"] == (2 if what == "fsync" else 1)
    assert on_server(url, "f.bin") == content
    # The local copy reads the same.
    with open(os.path.join(ws, "f.bin"), "rb") as f:
        assert f.read() == content


def test_a_server_that_refuses_chunked_bodies_gets_whole_files(sb):
    """It answers 411 at once and closes the connection (as a server that
    wants a Content-Length does): the reset mostly hides the answer, so
    two failures in a row are what tells; the sandbox then gets whole
    files only."""
    m, url, ws = sb
    m.allow = (r"takes no chunked upload", r"early upload not completed")
    sbx.set_faults(url, refuse_chunked=True, routes="files")
    for n in range(3):
        content = write_then(m, ws, f"r{n}.bin", "nothing", running=False)
        assert on_server(url, f"r{n}.bin") == content
    s = stats(m)
    # Tried twice; remembered for the sandbox: the third file never tried.
    assert int(s["early_puts"]) == 2, s
    assert int(s["early_puts_done"]) == 0, s
    assert int(s["early_puts_abandoned"]) == 2, s
    st = server_stats(url)
    assert st["chunked_puts"] == 0
    assert st["puts"] == 3
    assert "takes no chunked upload" in m.output()


def test_a_connection_dropped_mid_put_falls_back(sb):
    m, url, ws = sb
    m.allow = (r"early upload not completed",)
    sbx.set_faults(url, drop_chunked_kb=2048, routes="files")
    before = server_stats(url)
    content = write_then(m, ws, "d.bin", "nothing", running=False)
    assert on_server(url, "d.bin") == content
    s = stats(m)
    assert int(s["early_puts"]) == 1, s
    assert int(s["early_puts_done"]) == 0, s
    assert int(s["early_puts_abandoned"]) == 1, s
    after = server_stats(url)
    assert after["chunked_puts"] == before["chunked_puts"]
    assert after["puts"] - before["puts"] == 1
    # One failure is no refusal: the next file streams again.
    sbx.set_faults(url)
    content = write_then(m, ws, "d2.bin", "nothing")
    assert on_server(url, "d2.bin") == content
    assert stat(m, "early_puts") == 2
    assert stat(m, "early_puts_done") == 1
    assert server_stats(url)["chunked_puts"] - before["chunked_puts"] == 1


def test_unlink_while_written_leaves_nothing(sb):
    m, url, ws = sb
    path = os.path.join(ws, "gone.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for i in range(4):
            os.write(fd, block(i))
        assert stat(m, "early_puts_running") == 1
        os.unlink(path)
        os.write(fd, block(9))
    finally:
        os.close(fd)
    assert stat(m, "early_puts_abandoned") == 1
    assert sbx.get(url, "gone.bin").status == 404


def test_rename_while_written_lands_whole_at_the_new_name(sb):
    m, url, ws = sb
    a, b = os.path.join(ws, "a.bin"), os.path.join(ws, "b.bin")
    fd = os.open(a, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    content = b""
    try:
        for i in range(4):
            os.write(fd, block(i))
            content += block(i)
        assert stat(m, "early_puts_running") == 1
        os.rename(a, b)
        os.write(fd, block(9))
        content += block(9)
    finally:
        os.close(fd)
    assert stat(m, "early_puts_abandoned") == 1
    assert sbx.get(url, "a.bin").status == 404
    assert on_server(url, "b.bin") == content
