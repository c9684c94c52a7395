"""Cache files made ahead of need (vfs/spare.c).

New workspace files take an empty cache file a thread made before, instead
of making one (an inode and a directory entry) while the request waits.
The thread starts with the first new file. Counted in .sandboxfs/stats,
checked on the server and in the state directory; never timed.
"""
import os
import time

import mount
import sbx
from conftest import sandbox_url

READY = 16  # WS_SPARE_MAX


def mstats(m):
    s = m.stats()
    return s["cache_files_made_ahead"], s["cache_files_made_ahead_taken"]


def wait_ready(m, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end and mstats(m)[0] < READY:
        time.sleep(0.05)
    return mstats(m)[0]


def cache_files(m):
    return set(os.listdir(m.state / "cache" / "files"))


def test_new_files_take_the_cache_files_made_ahead(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        ws = m.path("sbx1", "workspace")
        # none is made before a first new file asks (the daemon may yet
        # fork into the background, which no thread survives)
        time.sleep(0.5)
        assert mstats(m) == (0, 0)
        (ws / "first").write_bytes(b"made its own")
        assert wait_ready(m) == READY
        assert mstats(m)[1] == 0
        ahead = cache_files(m)
        assert len(ahead) == READY + 1
        for i in range(10):
            (ws / f"f{i}").write_bytes(b"%d" % i * 1000)
        assert mstats(m)[1] == 10
        for i in range(10):
            r = sbx.get(url, f"f{i}")
            assert r.status == 200 and r.body == b"%d" % i * 1000
        # a cold read takes one too
        assert sbx.put(url, "g", b"from the server").status == 204
        with open(m.path("sbx1", "ctl"), "w") as f:
            f.write("true\n")
        assert (ws / "g").read_bytes() == b"from the server"
        assert mstats(m)[1] == 11
        # the 11 files kept made-ahead files (one cache file each), and
        # 11 more were made ahead to replace them
        assert wait_ready(m) == READY
        now = cache_files(m)
        assert ahead <= now and len(now) == READY + 1 + 11
    finally:
        m.stop()
    m.check_log()
    # a clean unmount leaves none behind (nor the clean copies)
    assert cache_files(m) == set()


def test_the_next_mount_deletes_what_a_crash_left(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    m.start()
    os.mkdir(m.path("sbx1"))
    (m.path("sbx1", "workspace") / "kept").write_bytes(b"saved")  # starts the thread
    assert wait_ready(m) == READY
    left = cache_files(m)
    m.kill9()
    assert left <= cache_files(m)
    m.start()
    try:
        assert m.path("sbx1", "workspace", "kept").read_bytes() == b"saved"  # a new file
        assert wait_ready(m) == READY
        # the restore deleted the old empty ones; new ones were made
        assert not left & cache_files(m)
        assert len(cache_files(m)) >= READY
    finally:
        m.stop()
    m.check_log()
