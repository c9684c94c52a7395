"""Bounded downloads (DESIGN.md §3: reads fetch the whole file into the
cache): a sandbox that lists a file as 1 byte and then sends a body
without end fills no disk, one that trickles two bytes a second holds no
reader and no unmount for ever. A body past the listed size plus its
slack (max(size/8, 64 KiB)) fails with EIO, a download under the minimum
rate (1 KiB/s) for 30 s fails with EIO, and an unmount stops the
downloads that run.

The hostile sandbox is fakeserver.FakeServer (Python, 127.0.0.1), whose
generator bodies stream without a length until the connection closes.
"""
import errno
import os
import signal
import subprocess
import time

import pytest

import faultlib as fl
from faultlib import ctl
from fakeserver import FakeServer
import mount

SLACK = 64 * 1024


def endless(limit=256 << 20):
    """64 KiB pieces as fast as they go (stops at limit, so that a build
    without the bound ends: with a success, which the tests refuse)."""
    piece = b"x" * 65536
    for _ in range(limit // len(piece)):
        yield piece


def trickle(seconds=150):
    """Two bytes a second, for longer than any test waits."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield b"x"
        time.sleep(0.5)


def hostile_sandbox(name, listed_size, body):
    f = FakeServer().start()
    f.route("GET", "/healthz", 200, {"status": "ok"})
    f.route("GET", "/files/", 200, {"entries": [{"name": name, "size": listed_size,
                                                 "isDir": False}]})
    f.route("GET", "/files/" + name, lambda req: (200, body()))
    return f


def attach(m, f, sid="hostile"):
    m.secrets.append(f.url)
    assert ctl(m.path(".sandboxfs", "ctl"), f"attach {sid} {f.url}")[0] == 0
    return m.path(sid, "workspace")


def disk_bytes(root):
    """Bytes the files under root take on disk."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for n in files:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def read_all(path):
    with open(path, "rb") as fh:
        return len(fh.read())


def test_endless_body_of_a_one_byte_file_is_eio_and_fills_no_disk(mounts):
    m = mounts()
    with hostile_sandbox("big.log", 1, endless) as f:
        ws = attach(m, f)
        before = disk_bytes(m.state)
        with fl.Timer() as t:
            with pytest.raises(OSError) as e:
                fl.bounded(lambda: read_all(ws / "big.log"), 60, "read of an endless body")
        assert e.value.errno == errno.EIO, e.value
        assert t.s < 20, t.s
        grown = disk_bytes(m.state) - before
        assert grown < SLACK + (1 << 20), grown
        assert f.count("GET", "/files/big.log") >= 1
        assert mount.read(m.path(".sandboxfs", "version"))  # alive


def test_trickle_read_ends_with_eio_within_the_stall_bound(mounts):
    m = mounts()
    with hostile_sandbox("slow.txt", 1, trickle) as f:
        ws = attach(m, f)
        with fl.Timer() as t:
            with pytest.raises(OSError) as e:
                fl.bounded(lambda: read_all(ws / "slow.txt"), 75, "read of a trickle")
        assert e.value.errno == errno.EIO, e.value
        # 30 s under 1 KiB/s, then EIO; never the trickle's 150 s
        assert t.s < 60, t.s
        assert mount.read(m.path(".sandboxfs", "version"))


@pytest.mark.parametrize("listed", [1, 4 << 20], ids=["small", "streamed"])
def test_unmount_during_a_trickle_is_bounded(mounts, listed):
    """SIGTERM while a reader waits on a trickling download: the daemon
    stops the download and exits at once, the reader gets an error."""
    m = mounts()
    with hostile_sandbox("slow.bin", listed, trickle) as f:
        ws = attach(m, f)
        cat = subprocess.Popen(["cat", str(ws / "slow.bin")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        try:
            assert fl.sbx.wait_for(lambda: f.count("GET", "/files/slow.bin") >= 1,
                                   timeout=20)
            time.sleep(1)
            assert cat.poll() is None  # still reading the trickle
            with fl.Timer() as t:
                rc, gone = m.terminate(timeout=25)
            assert gone, "the mount stayed"
            assert t.s < 15, t.s
            assert cat.wait(10) != 0
        finally:
            if cat.poll() is None:
                cat.kill()
                cat.wait()
