"""A cold read of a large workspace file streams (tests/bench/RESULTS.md C):
the first bytes come while the server is still sending the body, many
readers share one download, a download that breaks gives its readers EIO
and never leaves a short file as the content, and a command that runs
during a download makes the next open fetch the new content.

The server sends file bodies slowly (its body_rate_kbps fault) so that a
download lasts seconds; what the mount shows is checked against the
server's own copy (sha256) through the contract.
"""
import errno
import hashlib
import os
import subprocess
import threading
import time

import pytest

from conftest import sandbox_url
import mount
import sbx

MiB = 1024 * 1024
ALLOW = (r"download failed",)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def server_copy(url, path):
    r = sbx.get(url, path)
    assert r.status == 200, r.status
    return r.body


def gets(url):
    return sbx.stats(url)["gets"]


@pytest.fixture
def slow(tmp_path, orch):
    """A mount whose listings stay cached (no listing request in the way of
    a fault) and the sandbox sbx1: (mount, workspace dir, sandbox url)."""
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=60000"])
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        yield m, m.path("sbx1", "workspace"), sandbox_url(orch, "sbx1")
    finally:
        m.stop()
    m.check_log(allow=ALLOW)


def read_all(path, out, k):
    try:
        with open(path, "rb") as f:
            out[k] = f.read()
    except OSError as e:
        out[k] = e


def test_first_bytes_come_before_the_download_ends(slow):
    m, ws, url = slow
    data = os.urandom(64 * MiB)
    assert sbx.put(url, "big.bin", data).status == 204
    os.listdir(ws)
    sbx.set_faults(url, body_rate_kbps=8 * 1024, routes="files")  # 8 s for the body
    g0 = gets(url)
    t0 = time.monotonic()
    p = subprocess.run(["head", "-c", "4096", str(ws / "big.bin")], capture_output=True,
                       timeout=60)
    first = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert p.stdout == data[:4096]
    # The whole body takes 8 s at that rate: these bytes came before it ended.
    assert first < 3.0, f"head took {first:.1f} s"
    assert os.stat(ws / "big.bin").st_size == len(data)  # the listing's size meanwhile
    # More readers while it runs: they share the download.
    got = {}
    threads = [threading.Thread(target=read_all, args=(ws / "big.bin", got, k))
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    total = time.monotonic() - t0
    assert total > 6.0, f"the throttled body came in {total:.1f} s"
    for k in range(3):
        assert not isinstance(got[k], Exception), got[k]
        assert len(got[k]) == len(data) and sha(got[k]) == sha(data), k
    assert gets(url) - g0 == 1
    sbx.set_faults(url)
    assert sha(server_copy(url, "big.bin")) == sha(data)


def test_a_broken_download_is_eio_and_never_the_content(slow):
    m, ws, url = slow
    data = os.urandom(8 * MiB)
    assert sbx.put(url, "cut.bin", data).status == 204
    os.listdir(ws)
    # Half the body (4 MiB) comes in about 2 s, then the connection closes.
    sbx.set_faults(url, truncate_answer=True, body_rate_kbps=2 * 1024, routes="files")
    g0 = gets(url)
    fd = os.open(ws / "cut.bin", os.O_RDONLY)
    try:
        # What has arrived is read at once; the rest is waited for, and the
        # break answers EIO, now and later.
        assert os.pread(fd, 65536, 0) == data[:65536]
        with pytest.raises(OSError) as e:
            os.pread(fd, 65536, 6 * MiB)
        assert e.value.errno == errno.EIO
        with pytest.raises(OSError) as e:
            os.pread(fd, 65536, 7 * MiB)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert gets(url) - g0 == 1
    sbx.set_faults(url)
    # The part that came is not taken for the file: the next open fetches
    # it again, whole.
    with open(ws / "cut.bin", "rb") as f:
        again = f.read()
    assert len(again) == len(data)
    assert sha(again) == sha(server_copy(url, "cut.bin")) == sha(data)
    assert gets(url) - g0 == 3  # the second download and the check above
    assert os.stat(ws / "cut.bin").st_size == len(data)


def test_a_command_during_a_download_is_not_hidden_by_it(slow):
    m, ws, url = slow
    old = os.urandom(8 * MiB)
    assert sbx.put(url, "v.bin", old).status == 204
    os.listdir(ws)
    sbx.set_faults(url, body_rate_kbps=2 * 1024, routes="files")  # 4 s for the body
    first = {}
    reader = threading.Thread(target=read_all, args=(ws / "v.bin", first, 0))
    reader.start()
    time.sleep(0.5)  # the download runs
    # A command replaces the file (another size) while the old body comes;
    # the server goes on sending the old one, whole.
    cmd = "head -c 5000000 /dev/urandom > v.tmp && mv v.tmp v.bin"
    p = mount.sh(f"echo '{cmd}' > {m.path('sbx1', 'ctl')}")
    assert p.returncode == 0, p.stderr
    assert mount.read(m.path("sbx1", "exit")) == "0\n"
    # Opened while the old body still comes: the new content.
    with open(ws / "v.bin", "rb") as f:
        now = f.read()
    reader.join(60)
    # Opened before the command, it read old bytes (as far as the size the
    # kernel learnt after the command).
    assert not isinstance(first.get(0), Exception), first.get(0)
    assert len(first[0]) > 0 and old.startswith(first[0])
    sbx.set_faults(url)
    new = server_copy(url, "v.bin")
    assert len(new) == 5000000
    assert len(now) == len(new) and sha(now) == sha(new)
    assert os.stat(ws / "v.bin").st_size == len(new)
