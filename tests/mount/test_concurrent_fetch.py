"""Concurrent first opens of a file the mount has not fetched yet.

A lookup that answered the size of the partly downloaded cache file made
the kernel read the file as empty in every reader (found by the
benchmarks: `make -j2` compiled headers read as empty)."""
import os
import threading

import sbx
from conftest import sandbox_url


def test_concurrent_first_reads_see_the_whole_file(orch, sandbox):
    url = sandbox_url(orch, "sbx1")
    data = {}
    for i in range(6):
        data[i] = os.urandom(300000 + i)
        assert sbx.put(url, f"p/h{i}", data[i]).status == 204
    ws = os.path.join(sandbox, "workspace", "p")
    os.listdir(ws)  # the listing is cached; no file is fetched yet
    for i in range(6):
        got = [None] * 3

        def read(k, i=i, got=got):
            with open(os.path.join(ws, f"h{i}"), "rb") as f:
                got[k] = f.read()

        threads = [threading.Thread(target=read, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for k in range(3):
            assert got[k] is not None, "a reader did not finish"
            assert len(got[k]) == len(data[i]), (i, k, len(got[k]))
            assert got[k] == data[i]
