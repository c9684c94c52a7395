"""The workspace follows its sandbox (DESIGN.md §4): when the orchestrator
reports a new URL for a sandbox, file operations and the retries of pending
uploads go there; when the sandbox vanishes, its pending uploads go to the
rescue directory, health says so, and nothing is sent to the old URL again.

A scriptable orchestrator (fakeserver) reports two real sandbox-servers as
the same sandbox, one after the other; what each received is read from its
own /_admin/stats.
"""
import errno
import json
import os
import re
import sys
import threading
import time

import pytest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from fakeserver import FakeServer  # noqa: E402
import faultlib  # noqa: E402
import mount  # noqa: E402
import sbx  # noqa: E402

ALLOW = [r"upload failed", r"injected fault", r"server error", r"kept pending",
         r"uploads still pending"]


class Orchestrator:
    """A fake orchestrator whose one sandbox, sbx1, is served at a URL the
    test chooses (None: it is gone)."""

    def __init__(self):
        self.url_of_sbx1 = None
        self.lock = threading.Lock()
        self.fake = FakeServer().start()
        self.fake.route("GET", "/v1/sandbox-pool", 200, {"pools": [{"id": "default"}]})
        self.fake.route("GET", "/v1/sandbox/", self._one)
        self.fake.route("GET", "/v1/sandbox", self._list)
        self.fake.route("DELETE", "/v1/sandbox/", 204, b"")

    def serve(self, url):
        with self.lock:
            self.url_of_sbx1 = url

    def _status(self):
        return {"id": "sbx1", "poolId": "default", "status": "ready",
                "url": self.url_of_sbx1}

    def _list(self, req):
        if req.path.rstrip("/") != "/v1/sandbox":
            return self._one(req)
        with self.lock:
            return 200, {"sandboxes": [self._status()] if self.url_of_sbx1 else []}

    def _one(self, req):
        with self.lock:
            if req.path.rstrip("/") == "/v1/sandbox/sbx1" and self.url_of_sbx1:
                return 200, self._status()
        return 404, {"error": "unknown sandbox"}

    def stop(self):
        self.fake.stop()


def requests_to(server):
    """Requests a sandbox-server received (its /_admin/ ones not counted)."""
    return sbx.stats(server.url)["requests"]


def health(m):
    return mount.read(m.path(".sandboxfs", "health"))


def write_pending(ws, name, data):
    """Writes a file whose upload fails (close says EIO); the caller read
    the directory's listing just before the fault."""
    werr, cerr = faultlib.write_file(ws / name, data)
    assert (werr, cerr) == (0, errno.EIO), (werr, cerr)


# Listings (the orchestrator's and the workspace's) live this long: a file
# is created under a fault from the listing read just before, and a change
# of the orchestrator is seen once it has passed.
TTL_S = 3


def fake_mount(mounts, orch):
    m = mount.Mount(mounts.tmp, opts=[f"orchestrator={orch.fake.url}",
                                      f"listing_ttl={TTL_S * 1000}"])
    m.secrets.append(orch.fake.url)
    mounts.all.append(m)
    return m.start()


def test_workspace_follows_a_new_url(mounts):
    mounts.allow += ALLOW
    orch = Orchestrator()
    old, new = sbx.Server(faults=True).start(), sbx.Server(faults=True).start()
    try:
        orch.serve(old.url)
        m = fake_mount(mounts, orch)
        m.secrets += [old.url, new.url]
        ws = m.path("sbx1", "workspace")
        with open(ws / "f", "w") as f:
            f.write("one\n")
        assert (old.workspace / "f").read_text() == "one\n"
        # An upload the old place refuses stays pending...
        os.listdir(ws)
        sbx.set_faults(old.url, error_rate=1.0, routes="files")
        write_pending(ws, "g", b"pending\n")

        # ...and the sandbox moves: the orchestrator reports a new URL.
        orch.serve(new.url)
        time.sleep(TTL_S + 0.2)
        assert "sbx1" in os.listdir(m.mnt)  # the mount reads the listing
        time.sleep(0.2)  # a retry already on the wire has its answer
        seen = requests_to(old)
        assert sbx.wait_for(lambda: (new.workspace / "g").exists(), timeout=20), \
            "the pending upload did not go to the new URL"
        assert (new.workspace / "g").read_text() == "pending\n"
        with open(ws / "h", "w") as f:
            f.write("new\n")
        assert (new.workspace / "h").read_text() == "new\n"
        assert sorted(os.listdir(ws)) == ["g", "h"]  # the new place's listing
        err, _ = faultlib.ctl(m.path("sbx1", "ctl"), "cat h")
        assert err == 0, faultlib.errname(err)
        assert mount.read(m.path("sbx1", "stdout")) == "new\n"
        sbx.set_faults(old.url)
        time.sleep(1)  # retries would come within this
        after = requests_to(old)
        assert after == seen, "a request went to the old URL"
        assert sbx.wait_for(lambda: health(m) == "ok\n", timeout=10), health(m)
    finally:
        orch.stop()
        old.cleanup()
        new.cleanup()


def test_vanished_sandbox_keeps_pending_uploads_for_rescue(mounts):
    mounts.allow += ALLOW
    orch = Orchestrator()
    old = sbx.Server(faults=True).start()
    try:
        orch.serve(old.url)
        m = fake_mount(mounts, orch)
        m.secrets.append(old.url)
        ws = m.path("sbx1", "workspace")
        with open(ws / "f", "w") as f:
            f.write("saved\n")
        os.listdir(ws)
        sbx.set_faults(old.url, error_rate=1.0, routes="files")
        write_pending(ws, "sub-g", b"unsaved\n")

        # The sandbox vanishes from the orchestrator.
        orch.serve(None)
        time.sleep(TTL_S + 0.2)
        h = health(m)  # the mount reads the listing
        time.sleep(0.2)  # a retry already on the wire has its answer
        seen = requests_to(old)
        assert mount.read(m.path("sbx1", "state")) == "gone\n"
        kept = re.search(r"data of gone sandbox sbx1 is kept in (\S+)", h)
        assert kept, h
        assert (Path(kept.group(1)) / "sub-g").read_text() == "unsaved\n"
        assert "uploads pending" not in h, h

        # Whatever is done now, the old URL hears nothing more.
        sbx.set_faults(old.url)
        time.sleep(1)  # retries would come within this
        for op in (lambda: os.listdir(ws),
                   lambda: open(ws / "f").read(),
                   lambda: open(ws / "new", "w").close(),
                   lambda: faultlib.ctl(m.path("sbx1", "ctl"), "true")):
            try:
                op()
            except OSError:
                pass
        after = requests_to(old)
        assert after == seen, "a request went to the URL of a gone sandbox"
        assert not (old.workspace / "sub-g").exists()
    finally:
        orch.stop()
        old.cleanup()


def test_remount_sends_pending_uploads_to_the_new_url(mounts):
    mounts.allow += ALLOW
    orch = Orchestrator()
    old, new = sbx.Server(faults=True).start(), sbx.Server(faults=True).start()
    try:
        orch.serve(old.url)
        m = fake_mount(mounts, orch)
        m.secrets += [old.url, new.url]
        ws = m.path("sbx1", "workspace")
        os.listdir(ws)
        sbx.set_faults(old.url, error_rate=1.0, routes="files")
        write_pending(ws, "g", b"pending\n")
        m.kill9()
        # While the mount is down the sandbox moves.
        orch.serve(new.url)
        sbx.set_faults(old.url)
        seen = requests_to(old)
        m2 = fake_mount(mounts, orch)
        m2.secrets += [old.url, new.url]
        assert sbx.wait_for(lambda: (new.workspace / "g").exists(), timeout=20), \
            "the restored upload did not go to the new URL"
        time.sleep(1)
        after = requests_to(old)
        assert after == seen, "a request went to the old URL"
        assert not (old.workspace / "g").exists()
    finally:
        orch.stop()
        old.cleanup()
        new.cleanup()


def test_vanished_sandbox_keeps_a_deep_unsaved_file(mounts):
    """A pending file whose path is too deep to be rebuilt under the state
    directory (PATH_MAX) is still kept for rescue: flat, beside a note of
    its path. Nothing is abandoned that was not kept."""
    mounts.allow += ALLOW
    orch = Orchestrator()
    old = sbx.Server(faults=True).start()
    try:
        orch.serve(old.url)
        m = fake_mount(mounts, orch)
        m.secrets.append(old.url)
        ws = m.path("sbx1", "workspace")
        # 16 directories of 250 bytes: a workspace path of 4,024 bytes,
        # over PATH_MAX below the state directory
        names = [f"{i:02d}" + "d" * 248 for i in range(16)]
        dfd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for n in names:
                os.mkdir(n, dir_fd=dfd)
                nfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
                os.close(dfd)
                dfd = nfd
            os.listdir(dfd)
            sbx.set_faults(old.url, error_rate=1.0, routes="files")
            fd = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd)
            os.write(fd, b"deep and unsaved\n")
            with pytest.raises(OSError) as e:
                os.close(fd)
            assert e.value.errno == errno.EIO
        finally:
            os.close(dfd)
        orch.serve(None)
        time.sleep(TTL_S + 0.2)
        h = health(m)
        kept = re.search(r"data of gone sandbox sbx1 is kept in (\S+)", h)
        assert kept, h
        notes = list(Path(kept.group(1)).glob("long-path-*.path"))
        assert len(notes) == 1, notes
        want = "/".join(names + ["deep.txt"])
        assert notes[0].read_text() == want + "\n"
        assert Path(str(notes[0])[:-len(".path")]).read_bytes() == b"deep and unsaved\n"
        assert "uploads pending" not in h, h
    finally:
        orch.stop()
        old.cleanup()
