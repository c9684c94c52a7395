"""The listing cache's memory is bounded: a `find` over a tree of many
directories keeps at most `-o listing_max` of listings (counted in
.sandboxfs/stats), evicting the least recently used ones, and what it
shows is still the whole tree, the second time too (fetched again).
"""
import os
import subprocess

from conftest import sandbox_url
import mount
import sbx

DIRS = 200
FILES = 100
BOUND = 256 * 1024


def stats(m):
    out = {}
    for line in mount.read(m.path(".sandboxfs", "stats")).splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def test_a_find_over_many_directories_stays_within_listing_max(tmp_path, orch):
    # Listings live long here: only eviction makes them fetched again.
    m = mount.Mount(tmp_path, server=orch,
                    opts=[f"listing_max={BOUND}", "listing_ttl=600000"])
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        # 200 directories of 100 files with long names, made in the sandbox.
        cmd = (f"mkdir t && cd t && for d in $(seq 1 {DIRS}); do mkdir d$d && "
               f"(cd d$d && seq 1 {FILES} | sed 's/^/a-file-with-a-rather-long-name-/' "
               f"| xargs touch); done")
        r = sbx.execute(url, cmd, 120)
        assert r.status == 200 and r.json()["exitCode"] == 0, r
        ws = m.path("sbx1", "workspace")
        want = {"t"} | {f"t/d{d}" for d in range(1, DIRS + 1)} | {
            f"t/d{d}/a-file-with-a-rather-long-name-{f}"
            for d in range(1, DIRS + 1) for f in range(1, FILES + 1)}
        for walk in range(2):
            p = subprocess.run(["find", "t"], cwd=ws, capture_output=True, text=True,
                               timeout=120)
            assert p.returncode == 0, p.stderr
            got = p.stdout.splitlines()
            assert len(got) == len(want) and set(got) == want, walk
            s = stats(m)
            assert int(s["listing_max_bytes"]) == BOUND
            # Far more was listed than the bound holds: old listings went.
            assert int(s["listing_bytes"]) <= BOUND, s["listing_bytes"]
            assert int(s["listing_entries"]) < DIRS * FILES // 4, s["listing_entries"]
            assert int(s["listing_evictions"]) > 0
        # The second walk fetched evicted listings again.
        assert int(stats(m)["listings_fetched"]) > 2 * DIRS
        # A listing of an open directory stays while it is read; one of a
        # closed directory goes (a walk later, it is fetched again).
        fd = os.open(ws / "t" / "d1", os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert len(os.listdir(fd)) == FILES
            assert len(os.listdir(ws / "t" / "d2")) == FILES
            subprocess.run(["find", "t"], cwd=ws, capture_output=True, timeout=120,
                           check=True)
            fd2 = os.open(ws / "t" / "d2", os.O_RDONLY | os.O_DIRECTORY)
            try:
                before = int(stats(m)["listings_fetched"])
                assert len(os.listdir(fd)) == FILES
                assert int(stats(m)["listings_fetched"]) == before
                assert len(os.listdir(fd2)) == FILES
                assert int(stats(m)["listings_fetched"]) == before + 1
            finally:
                os.close(fd2)
        finally:
            os.close(fd)
    finally:
        m.stop()
    m.check_log()
