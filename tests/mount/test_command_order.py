"""Commands and uploads keep the user's order (DESIGN.md §2, §5): before a
command every pending upload of its sandbox is delivered, or the command is
refused at the ctl write and nothing reaches /execute; the retry thread
never uploads into a sandbox while a command holds its seat.

Results are checked through the sandbox contract (its files, its
/_admin/log and /_admin/stats), not only through the mount.
"""
import errno
import json
import os
import threading
import time

from conftest import executed, sandbox_url
import faultlib
import mount
import sbx

# What the daemon logs while uploads fail.
ALLOW = (r"upload failed", r"injected fault", r"server error", r"kept pending",
         r"uploads still pending")


def server_file(url, path):
    """The sandbox's copy of a file, read by a command (the /files routes
    may be faulted)."""
    r = sbx.execute(url, f"cat {path} 2>/dev/null || echo MISSING")
    assert r.status == 200, r.status
    return r.json()["stdout"]


def server_puts(url):
    return sbx.stats(url)["puts"]


def info(m, sid):
    return json.loads(mount.read(m.path(sid, "info")))


def test_pending_upload_blocks_the_next_command(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=30000"])
    with m:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        m.secrets.append(url)
        ws = m.path("sbx1", "workspace")
        os.listdir(ws)
        sbx.set_faults(url, error_rate=1.0, routes="files")
        werr, cerr = faultlib.write_file(ws / "f", b"v1\n")
        assert (werr, cerr) == (0, errno.EIO), (werr, cerr)

        # The command would overwrite f before v1 lands: refused, not sent.
        err, _ = faultlib.ctl(m.path("sbx1", "ctl"), "echo v2 > f")
        assert err == errno.EIO, faultlib.errname(err)
        sent = executed(orch, "sbx1")
        assert "echo v2 > f" not in sent, sent
        why = info(m, "sbx1")["last_error"]
        assert "f" in why and "upload" in why, why
        health = mount.read(m.path(".sandboxfs", "health"))
        assert "sbx1/workspace/f" in health, health
        assert mount.read(m.path("sbx1", "status")) == "failed\n"
        assert mount.read(m.path("sbx1", "exit")) == ""

        # PUTs work again: v1 lands by itself, then the command runs, and
        # v1 never comes back over v2.
        sbx.set_faults(url)
        assert sbx.wait_for(lambda: server_file(url, "f") == "v1\n", timeout=30)
        err, _ = faultlib.ctl(m.path("sbx1", "ctl"), "echo v2 > f")
        assert err == 0, faultlib.errname(err)
        now = server_file(url, "f")
        assert now == "v2\n", now
        time.sleep(2)  # a retry would come within this (base 200 ms)
        later = server_file(url, "f")
        assert later == "v2\n", later
        runs = executed(orch, "sbx1").count("echo v2 > f")
        assert runs == 1, runs
        assert sbx.wait_for(lambda: mount.read(m.path(".sandboxfs", "health")) == "ok\n",
                            timeout=10)
    m.check_log(allow=ALLOW + (r"not sent",))


def test_no_retry_while_a_command_runs(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["listing_ttl=30000"])
    with m:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        m.secrets.append(url)
        ws = m.path("sbx1", "workspace")
        os.listdir(ws)
        result = {}
        t = threading.Thread(target=lambda: result.update(
            rc=faultlib.ctl(m.path("sbx1", "ctl"), "sleep 6")[0]))
        t.start()
        try:
            assert sbx.wait_for(
                lambda: mount.read(m.path("sbx1", "status")) == "running\n", timeout=10)
            # A file written during the command whose upload fails is pending.
            sbx.set_faults(url, error_rate=1.0, routes="files")
            werr, cerr = faultlib.write_file(ws / "g", b"during\n")
            assert (werr, cerr) == (0, errno.EIO), (werr, cerr)
            sbx.set_faults(url)
            puts = server_puts(url)
            time.sleep(2.5)  # retries come every 200 ms at first
            after = server_puts(url)
            assert after == puts, "an upload went in during the command"
            assert mount.read(m.path("sbx1", "status")) == "running\n"
        finally:
            t.join(30)
        assert result.get("rc") == 0, result
        # Once the seat is free the pending upload goes in.
        assert sbx.wait_for(lambda: server_file(url, "g") == "during\n", timeout=30)
    m.check_log(allow=ALLOW)
