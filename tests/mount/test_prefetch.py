"""Listings fetched ahead of a tree walk (vfs/prefetch.c).

When a directory is read just after its parent (a walker going down), the
listings of its subdirectories are fetched ahead; an `ls` of one directory
fetches nothing ahead; a listing fetched ahead is fetched once (the
walker's own fetch finds it or joins it) and is dropped by a command like
any other. Counted on the server (/_admin/stats `lists`) and in
.sandboxfs/stats, never timed.
"""
import os
import subprocess
import time

import pytest

import mount
import sbx
from conftest import sandbox_url

SUBDIRS = 8


def mstats(m):
    s = m.stats()
    return s["listings_fetched"], s["listings_prefetched"]


def server_lists(url):
    return int(sbx.stats(url)["lists"])


def make_tree(url):
    # t/dA/sB/fC, made in the sandbox: the mount has seen none of it
    cmd = (f"mkdir t u && for a in 1 2 3; do for b in $(seq 1 {SUBDIRS}); do "
           f"mkdir -p t/d$a/s$b u/s$b && touch t/d$a/s$b/f1 t/d$a/s$b/f2; done; done")
    r = sbx.execute(url, cmd, 60)
    assert r.status == 200 and r.json()["exitCode"] == 0, r


def wait_prefetched(m, want, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = mstats(m)[1]
        if got >= want:
            return got
        time.sleep(0.05)
    return mstats(m)[1]


@pytest.fixture
def tree(tmp_path, orch):
    """A mount, and a sandbox holding make_tree's tree: (mount, url, workspace)."""
    # Listings stay fresh for the whole test: only what is counted here
    # fetches them again.
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=600000"])
    m.start()
    try:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        make_tree(url)
        yield m, url, m.path("sbx1", "workspace")
    finally:
        m.stop()
    m.check_log()


def test_going_down_a_level_fetches_the_subdirectories_ahead_once(tree):
    m, url, ws = tree
    os.listdir(ws)
    s0 = server_lists(url)
    # t read right after the root: d1, d2 and d3 come ahead
    assert sorted(os.listdir(ws / "t")) == ["d1", "d2", "d3"]
    assert wait_prefetched(m, 3) == 3
    assert server_lists(url) - s0 == 1 + 3
    l0, p0 = mstats(m)
    s0 = server_lists(url)
    # t/d1 read right after t: its listing is here, its subdirectories
    # come ahead
    assert sorted(os.listdir(ws / "t" / "d1")) == [f"s{b}" for b in range(1, SUBDIRS + 1)]
    assert wait_prefetched(m, p0 + SUBDIRS) == p0 + SUBDIRS
    assert server_lists(url) - s0 == SUBDIRS
    # reading them now asks the server nothing more
    for b in range(1, SUBDIRS + 1):
        assert sorted(os.listdir(ws / "t" / "d1" / f"s{b}")) == ["f1", "f2"]
    assert server_lists(url) - s0 == SUBDIRS
    assert mstats(m)[0] - l0 == SUBDIRS


def test_ls_of_one_directory_fetches_nothing_ahead(tree):
    m, url, ws = tree
    s0 = server_lists(url)
    # u is looked up (the root's listing), never read before it
    assert len(os.listdir(ws / "u")) == SUBDIRS
    time.sleep(1)
    assert mstats(m)[1] == 0
    assert server_lists(url) - s0 == 2  # the root's listing and u's


def test_a_find_lists_every_directory_once_and_sees_the_whole_tree(tree):
    m, url, ws = tree
    os.listdir(ws)
    s0 = server_lists(url)
    p = subprocess.run(["find", "t"], cwd=ws, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = sbx.execute(url, "find t", 60)
    assert r.status == 200 and r.json()["exitCode"] == 0, r
    want = r.json()["stdout"].split()
    assert sorted(p.stdout.split()) == sorted(want)
    dirs = 1 + 3 + 3 * SUBDIRS
    # each directory listed once, whether the walker or a fetch ahead
    # got there first
    assert server_lists(url) - s0 == dirs
    assert mstats(m)[1] > 0


def test_a_command_drops_what_was_fetched_ahead(tree):
    m, url, ws = tree
    os.listdir(ws)
    os.listdir(ws / "t")
    assert wait_prefetched(m, 3) == 3
    p0 = mstats(m)[1]
    os.listdir(ws / "t" / "d2")
    assert wait_prefetched(m, p0 + SUBDIRS) == p0 + SUBDIRS
    with open(m.path("sbx1", "ctl"), "w") as f:
        f.write("touch t/d2/s3/new && rm t/d2/s4/f1\n")
    assert mount.read(m.path("sbx1", "exit")).strip() == "0"
    assert sorted(os.listdir(ws / "t" / "d2" / "s3")) == ["f1", "f2", "new"]
    assert sorted(os.listdir(ws / "t" / "d2" / "s4")) == ["f2"]
