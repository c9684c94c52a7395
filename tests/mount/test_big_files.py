"""Files larger than the cache: `-o cache_max` bounds what is kept after
close, not what one open file may use. A file larger than it is read as it
downloads and written to local disk; once closed and clean it is evicted
first, and the cache is back under cache_max. The real limit is a reserve
the state directory's file system keeps free (5 %): ENOSPC only past it,
said in health.

What the mount shows is checked against the server's own copy (sha256)
through the contract.
"""
import errno
import hashlib
import os
import subprocess
import time

import pytest

from conftest import sandbox_url
import mount
import sbx

MiB = 1024 * 1024
CACHE_MAX = 64 * MiB
BIG = 100 * MiB


def sha_of_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(MiB)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def sha_on_server(url, path):
    h = hashlib.sha256()
    n = 0
    it = sbx.Client(url).get_stream(path)
    assert next(it) == 200
    for b in it:
        h.update(b)
        n += len(b)
    return h.hexdigest(), n


def stats(m):
    out = {}
    for line in mount.read(m.path(".sandboxfs", "stats")).splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def cache_bytes(m):
    return int(stats(m)["cache_bytes"])


def random_file(path, size, seed):
    """A file of size pseudo-random bytes (cheap to make, never compressible
    away); returns its sha256."""
    h = hashlib.sha256()
    block = hashlib.sha256(seed.encode()).digest() * (MiB // 32)
    with open(path, "wb") as f:
        for i in range(size // MiB):
            b = i.to_bytes(8, "little") + block[8:]
            f.write(b)
            h.update(b)
    return h.hexdigest()


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


@pytest.fixture
def small(tmp_path, orch):
    """A mount with -o cache_max=64M and the sandbox sbx1: (mount, workspace
    dir, sandbox url)."""
    m = mount.Mount(tmp_path, server=orch, opts=[f"cache_max={CACHE_MAX // MiB}M"])
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        m.secrets.append(url)
        yield m, m.path("sbx1", "workspace"), url
    finally:
        m.stop()
    m.check_log()


def test_cat_of_a_file_larger_than_the_cache(small, tmp_path):
    m, ws, url = small
    src = tmp_path / "src.bin"
    want = random_file(src, BIG, "cat")
    with open(src, "rb") as f:
        assert sbx.put(url, "big.bin", f.read()).status == 204
    assert sha_on_server(url, "big.bin") == (want, BIG)
    p = subprocess.run(["bash", "-o", "pipefail", "-c", f"cat {ws / 'big.bin'} | sha256sum"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == want
    # Closed and clean, it is the first to go: the cache is back under its
    # bound (release comes just after the close).
    assert sbx.wait_for(lambda: cache_bytes(m) <= CACHE_MAX, timeout=10), stats(m)
    s = stats(m)
    assert int(s["cache_max_bytes"]) == CACHE_MAX
    assert int(s["cache_evictions"]) >= 1
    assert int(s["cache_enospc"]) == 0
    # Read again: fetched again, the same bytes.
    assert sha_of_file(ws / "big.bin") == want
    assert sbx.wait_for(lambda: cache_bytes(m) <= CACHE_MAX, timeout=10), stats(m)


def test_cp_in_and_out_of_a_file_larger_than_the_cache(small, tmp_path):
    m, ws, url = small
    src = tmp_path / "in.bin"
    want = random_file(src, BIG, "cp")
    p = subprocess.run(["cp", str(src), str(ws / "in.bin")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sha_on_server(url, "in.bin") == (want, BIG)
    assert os.stat(ws / "in.bin").st_size == BIG
    assert sbx.wait_for(lambda: cache_bytes(m) <= CACHE_MAX, timeout=10), stats(m)
    # And out again, through a cold read.
    out = tmp_path / "out.bin"
    p = subprocess.run(["cp", str(ws / "in.bin"), str(out)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sha_of_file(out) == want
    assert sbx.wait_for(lambda: cache_bytes(m) <= CACHE_MAX, timeout=10), stats(m)
    # A smaller file read meanwhile stays cached: the big ones went first.
    small_data = os.urandom(MiB)
    assert sbx.put(url, "small.bin", small_data).status == 204
    assert sbx.wait_for(lambda: os.path.exists(ws / "small.bin"), timeout=10)
    with open(ws / "small.bin", "rb") as f:
        assert f.read() == small_data
    with open(ws / "in.bin", "rb") as f:
        while f.read(MiB):
            pass
    assert sbx.wait_for(lambda: cache_bytes(m) <= CACHE_MAX, timeout=10), stats(m)
    hits = int(stats(m)["cache_hits"])
    with open(ws / "small.bin", "rb") as f:
        assert f.read() == small_data
    assert int(stats(m)["cache_hits"]) == hits + 1
    # No whole file in memory: the daemon's peak stays far under the file.
    print(f"\npeak RSS after 100 MiB in and out: {vm_hwm_kib(m.pid) // 1024} MiB")
    with open(f"/proc/{m.pid}/maps") as f:
        sanitized = "libasan" in f.read()  # its shadow memory is not ours
    assert sanitized or vm_hwm_kib(m.pid) * 1024 < BIG // 2, vm_hwm_kib(m.pid)


def test_a_large_file_is_read_while_it_downloads(small, tmp_path):
    m, ws, url = small
    src = tmp_path / "slow.bin"
    random_file(src, BIG, "slow")
    with open(src, "rb") as f:
        head = f.read(4096)
        f.seek(0)
        assert sbx.put(url, "slow.bin", f.read()).status == 204
    os.listdir(ws)
    # 100 MiB at 25 MiB/s: 4 s for the body.
    sbx.set_faults(url, body_rate_kbps=25 * 1024, routes="files")
    t0 = time.monotonic()
    with open(ws / "slow.bin", "rb") as f:
        assert f.read(4096) == head
        first = time.monotonic() - t0
        f.seek(BIG - 4096)
        assert len(f.read()) == 4096
    total = time.monotonic() - t0
    sbx.set_faults(url)
    assert first < 2.0, f"the first bytes took {first:.1f} s"
    assert total > 3.0, f"the throttled body came in {total:.1f} s"
    assert sbx.wait_for(lambda: cache_bytes(m) <= CACHE_MAX, timeout=10), stats(m)


# --- the reserve of the state directory's file system ------------------------

@pytest.fixture
def small_fs(tmp_path):
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with mount.small_tmpfs(tmp_path, "200m") as d:
        yield d


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def health(m):
    return mount.read(m.path(".sandboxfs", "health"))


def test_enospc_only_past_the_reserve(tmp_path, orch, small_fs):
    state = small_fs / "state"
    # The default cache_max (1 GiB) is far beyond the 200 MiB file system.
    m = mount.Mount(tmp_path, server=orch, state=state)
    with m:
        os.mkdir(m.path("full"))
        url = sandbox_url(orch, "full")
        m.secrets.append(url)
        ws = m.path("full", "workspace")
        reserve = os.statvfs(small_fs).f_blocks * os.statvfs(small_fs).f_frsize // 20
        room = free_bytes(small_fs) - reserve
        chunk = os.urandom(MiB)
        written = 0
        fd = os.open(ws / "fill.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with pytest.raises(OSError) as e:
                for _ in range(300):
                    written += os.write(fd, chunk)
            assert e.value.errno == errno.ENOSPC
            # Up to the reserve, not short of it, never into it.
            assert room - 2 * MiB <= written <= room, (written, room)
            assert free_bytes(small_fs) >= reserve - MiB
            assert "reserve" in health(m)
            print(f"\nreserve: {written >> 20} MiB written of {room >> 20} MiB above "
                  f"the reserve; health: {health(m).strip()}")
            assert int(stats(m)["cache_enospc"]) >= 1
        finally:
            os.close(fd)  # uploads what was written
        want = hashlib.sha256(chunk * (written // MiB) + chunk[:written % MiB]).hexdigest()
        assert sha_on_server(url, "fill.bin") == (want, written)
        # Clean now, its copy may stay cached: a new file takes its room.
        more = os.urandom(8 * MiB)
        with open(ws / "more.bin", "wb") as f:
            f.write(more)
        assert sbx.get(url, "more.bin").body == more
        assert "reserve" not in health(m)
        # A download that cannot fit is refused at open, the mount lives on.
        big = tmp_path / "big.bin"
        random_file(big, 250 * MiB, "big")
        with open(big, "rb") as f:
            assert sbx.put(url, "huge.bin", f.read()).status == 204
        assert sbx.wait_for(lambda: os.path.exists(ws / "huge.bin"), timeout=10)
        with pytest.raises(OSError) as e:
            with open(ws / "huge.bin", "rb") as f:
                f.read(MiB)
        assert e.value.errno == errno.ENOSPC
        assert "reserve" in health(m)
        # What is cached stays (evicting it would not have made room).
        misses = int(stats(m)["cache_misses"])
        with open(ws / "more.bin", "rb") as f:
            assert f.read() == more
        assert int(stats(m)["cache_misses"]) == misses
        # Any write that fits ends the refusal in health.
        with open(ws / "after.txt", "wb") as f:
            f.write(b"after\n")
        assert sbx.get(url, "after.txt").body == b"after\n"
        assert "reserve" not in health(m)
    m.check_log()
