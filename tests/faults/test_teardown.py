"""Unmount is clean: the threads of downloads still running are stopped and
joined before the backend is freed, and the daemon exits within a bound.

A download thread's exit still uses the backend (its connection handle is
given back by a thread-specific data destructor). The race is short, so
the daemon runs with tests/lib/slow_thread_exit.c preloaded: it makes the
exit of each of the daemon's own threads slow (as a thread descheduled at
its exit would be) and reports on stderr a pthread_key_delete (the first
thing backend_free does) while a destructor of that key still runs. Under
the sanitizer build a use after free there is reported too.
"""
import os
import subprocess
import time

import faultlib as fl
import sbx

MiB = 1 << 20
SHIM = sbx.REPO / "tests" / "lib" / "slow_thread_exit.c"


def build_shim(tmp):
    so = tmp / "slow_thread_exit.so"
    p = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(so), str(SHIM), "-ldl"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return so


def test_unmount_during_slow_downloads_joins_their_threads(tmp_path, mounts):
    so = build_shim(tmp_path)
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = {"LD_PRELOAD": str(so), "SLOW_EXIT_MS": "300",
           # the shim comes before the sanitizer runtime in the link map
           "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}
    m = mounts(opts=["listing_ttl=60000"], env=env)
    os.mkdir(m.path("dl"))
    url = fl.sandbox_url(mounts.orch, "dl")
    m.secrets.append(url)
    data = os.urandom(8 * MiB)
    c = sbx.Client(url)
    for i in range(4):
        assert c.put(f"big{i}.bin", data).status == 204
    ws = m.path("dl", "workspace")
    os.listdir(ws)
    # 8 MiB at 256 KiB/s: each body takes 32 s.
    sbx.set_faults(url, body_rate_kbps=256, routes="files")
    for i in range(4):
        # A large file downloads on a thread of its own; the reader takes
        # the first bytes and goes, the download goes on.
        with open(ws / f"big{i}.bin", "rb") as f:
            assert f.read(4096) == data[:4096]
    assert sbx.wait_for(lambda: sbx.stats(url)["active"] >= 4, timeout=10)
    t0 = time.monotonic()
    rc = m.stop()
    took = time.monotonic() - t0
    sbx.set_faults(url)
    out = m.output()
    assert rc == 0, out[-2000:]
    # Stopped at their next piece of body, not at the end of it (32 s).
    assert took < 15, f"unmount took {took:.1f} s"
    shim = [line for line in out.splitlines() if line.startswith("slow_thread_exit:")]
    assert not [line for line in shim if "still runs" in line], "\n".join(shim)
    # The shim was there and slowed the download threads' exits.
    delayed = [int(line.split()[1]) for line in shim if line.endswith("exits delayed")]
    assert delayed and delayed[0] >= 4, shim
    assert not fl.sanitizer_lines(out), out[-4000:]
