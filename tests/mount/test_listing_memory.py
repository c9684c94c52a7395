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


def test_mtimes_stay_put_when_listings_are_evicted(tmp_path, orch):
    """The listing has no times: a file's mtime must not move because its
    listing was evicted and fetched again, or git reads every file again and
    make and rsync redo their work. A file this mount wrote keeps the time
    of its last write, one it never changed the time the mount first knew
    the workspace; a file that appears later shows when it was first seen."""
    m = mount.Mount(tmp_path, server=orch,
                    opts=[f"listing_max={BOUND}", "listing_ttl=600000",
                          "attr_timeout=0"])
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        os.mkdir(m.path("big"))
        r = sbx.execute(sandbox_url(orch, "sbx1"), "mkdir t && echo old > t/untouched.txt")
        assert r.status == 200 and r.json()["exitCode"] == 0, r
        ws = m.path("sbx1", "workspace")
        (ws / "mine.txt").write_text("written here\n")
        names = ("mine.txt", "t/untouched.txt")
        before = {n: os.stat(ws / n).st_mtime_ns for n in names}
        # another sandbox's many listings push this one's out of the cache
        cmd = (f"mkdir t && cd t && for d in $(seq 1 {DIRS}); do mkdir d$d && "
               f"(cd d$d && seq 1 {FILES} | sed 's/^/a-file-with-a-rather-long-name-/' "
               f"| xargs touch); done")
        r = sbx.execute(sandbox_url(orch, "big"), cmd, 120)
        assert r.status == 200 and r.json()["exitCode"] == 0, r
        subprocess.run(["find", "t"], cwd=m.path("big", "workspace"), capture_output=True,
                       timeout=120, check=True)
        fetched = int(stats(m)["listings_fetched"])
        after = {n: os.stat(ws / n).st_mtime_ns for n in names}
        assert int(stats(m)["listings_fetched"]) >= fetched + 2  # listed again
        assert after == before
        # a name that appears later (seen after a command) is newer
        assert sbx.put(sandbox_url(orch, "sbx1"), "t/new.txt", b"new\n").status == 204
        with open(m.path("sbx1", "ctl"), "w") as f:
            f.write("true")
        assert sorted(os.listdir(ws / "t")) == ["new.txt", "untouched.txt"]
        assert os.stat(ws / "t" / "new.txt").st_mtime_ns > before["t/untouched.txt"]
        # The first command's list has every file, with the sandbox's own
        # time (whole seconds there). The sandbox stamped mine.txt when the
        # upload arrived, by its file system's coarse clock, which may lag the
        # mount's write time across a second boundary: compare with the
        # sandbox's own figure, and the mount's earlier one within a second.
        r = sbx.execute(sandbox_url(orch, "sbx1"), "stat -c %Y mine.txt")
        assert r.status == 200 and r.json()["exitCode"] == 0, r
        sandbox_s = int(r.json()["stdout"])
        assert os.stat(ws / "mine.txt").st_mtime_ns // 10**9 == sandbox_s
        assert abs(sandbox_s * 10**9 - before["mine.txt"]) < 2 * 10**9
    finally:
        m.stop()
    m.check_log()
