"""Crashes (DESIGN.md §5): kill -9 of the daemon at random points while
commands run, files upload and the journal compacts (journal_max=8K makes
it compact every few records), then a remount on the same state
directory, round after round. After each remount: the journal replays,
every file whose close returned 0 is on the server with its content,
files whose close said EIO (kept pending) arrive too, no command reached
the server twice, every command whose write returned 0 ran exactly once,
`last` counts every command sent.

And a full disk under the state directory (a 3 MiB tmpfs): writes and
commands fail cleanly with ENOSPC/EIO before anything is sent, nothing
acknowledged is lost, and the mount works again once there is room.

The default suite runs 10 rounds; SANDBOXFS_LONG=1 (.ci/run) adds the
50-round test. SANDBOXFS_CRASH_SEED fixes the random kill points.
"""
import errno
import hashlib
import os
import random
import subprocess
import threading
import time

import pytest

import faultlib as fl
from faultlib import ctl, sandbox_url
import mount
import sbx

ALLOW = [r"torn", r"unknown", r"upload failed", r"kept pending", r"pending",
         r"injected fault", r"server error", r"answer lost", r"not run", r"repaired",
         r"cut"]
SEED = int(os.environ.get("SANDBOXFS_CRASH_SEED", str(int(time.time()))))


class Workload:
    """Commands, uploads and failing uploads through descriptors opened
    on the mount, so nothing can land in the bare mount point after the
    daemon dies."""

    def __init__(self, m, url, rnd, tag):
        self.m, self.url, self.rnd, self.tag = m, url, rnd, tag
        self.acked_files = {}     # path -> sha256, close returned 0
        self.pending_files = {}   # path -> sha256, close returned EIO
        self.acked_cmds = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors = []
        self.wsfd = os.open(m.path("crash", "workspace"), os.O_RDONLY | os.O_DIRECTORY)
        self.ctlfd = os.open(m.path("crash", "ctl"), os.O_WRONLY)
        self.threads = [threading.Thread(target=self.commands)] + \
            [threading.Thread(target=self.files, args=(k,)) for k in range(2)]

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(60)
            assert not t.is_alive(), "a workload thread hung after the crash"
        for fd in (self.wsfd, self.ctlfd):
            try:
                os.close(fd)
            except OSError:
                pass

    def commands(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            cmd = f"echo {self.tag}-c{i} >> cmds.log; seq 1 {self.rnd.randrange(1, 3000)}"
            if self.rnd.random() < 0.2:
                cmd = f"sleep 0.{self.rnd.randrange(1, 4)}; " + cmd
            try:
                n = os.write(self.ctlfd, (cmd + "\n").encode())
                assert n == len(cmd) + 1
                with self.lock:
                    self.acked_cmds.append(cmd)
            except OSError as e:
                if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO, errno.EBUSY):
                    if e.errno in (errno.ENOTCONN, errno.ECONNABORTED):
                        return
                    continue
                self.errors.append(f"ctl: {e!r}")
                return

    def files(self, k):
        i = 0
        while not self.stop.is_set():
            i += 1
            name = f"{self.tag}-w{k}-{i}.bin"
            size = self.rnd.choice([0, 100, 5000, 70000, 300000, 1 << 20])
            data = self.rnd.randbytes(size)
            h = hashlib.sha256(data).hexdigest()
            stage, fd, failed = "open", None, None
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644,
                             dir_fd=self.wsfd)
                stage = "write"
                off = 0
                while off < len(data):
                    off += os.write(fd, data[off:off + 65536])
                if self.rnd.random() < 0.3:
                    stage = "fsync"
                    try:
                        os.fsync(fd)
                        with self.lock:  # an fsync that returned 0 is an ack
                            self.acked_files[name] = h
                    except OSError as e:
                        failed = e
                stage = "close"
                f, fd = fd, None
                os.close(f)
                if failed is None:
                    with self.lock:
                        self.acked_files[name] = h
                else:
                    raise failed
            except OSError as e:
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                if e.errno in (errno.ENOTCONN, errno.ECONNABORTED):
                    return
                if e.errno == errno.EIO:
                    if stage in ("fsync", "close"):
                        # written whole, upload failed: kept pending
                        with self.lock:
                            self.pending_files[name] = h
                    continue
                self.errors.append(f"file {stage}: {e!r}")
                return


def server_hashes(url, names):
    """sha256 of each named file on the sandbox (GET, keep-alive)."""
    c = sbx.Client(url, keep_alive=True)
    got = {}
    try:
        for n in names:
            r = c.get(n)
            if r.status == 200:
                got[n] = hashlib.sha256(r.body).hexdigest()
    finally:
        c.close()
    return got


def diagnose(m, name, logs):
    """What the journal and the daemons said about a file."""
    p = subprocess.run([str(mount.sandboxfs_binary()), "--dump-journal", str(m.state)],
                       capture_output=True, text=True, timeout=30)
    j = [line for line in p.stdout.splitlines() if name in line]
    said = [line for out in logs + [m.output()] for line in out.splitlines()
            if "lost" in line or "missing" in line or "abandon" in line]
    return "journal:\n" + "\n".join(j[-10:]) + "\ndaemon:\n" + "\n".join(said[-10:])


def crash_rounds(tmp_path, orch, rounds):
    rnd = random.Random(SEED)
    opts = ["journal_max=8K", "listing_ttl=200"]
    acked_files, pending_files, acked_cmds = {}, {}, []
    m = mount.Mount(tmp_path, server=orch, opts=opts).start()
    try:
        os.mkdir(m.path("crash"))
        url = sandbox_url(orch, "crash")
        m.secrets.append(url)
    finally:
        m.stop()
    logs = []
    for rd in range(rounds):
        m = mount.Mount(tmp_path, server=orch, opts=opts)
        m.secrets.append(url)
        try:
            m.start()
        except mount.MountError as e:
            raise AssertionError(f"round {rd}: the journal did not replay: {e}")
        try:
            # Before the next crash: everything acknowledged so far is there
            # (an empty create's close journals its intent and the PUT
            # follows at release: after a crash, the remount's retry).
            assert sbx.wait_for(lambda: "pending" not in mount.read(
                m.path(".sandboxfs", "health")), timeout=30, interval=0.2), \
                mount.read(m.path(".sandboxfs", "health"))
            got = server_hashes(url, acked_files)
            lost = [n for n, h in acked_files.items() if got.get(n) != h]
            assert not lost, f"round {rd} (seed {SEED}): acknowledged files lost: " + \
                ", ".join(f"{n} (want {acked_files[n][:8]}, server {got.get(n, 'none')[:8]})"
                          for n in lost[:5]) + "\n" + diagnose(m, lost[0], logs)
            w = Workload(m, url, rnd, f"r{rd}")
            # sometimes the uploads fail for a while: pending at the crash
            faulty = rnd.random() < 0.3
            if faulty:
                sbx.set_faults(url, error_rate=0.5, routes="files")
            w.start()
            time.sleep(rnd.uniform(0.05, 1.2))
            m.kill9()
            w.join()
            sbx.set_faults(url)
            assert not w.errors, (rd, w.errors[:5])
            acked_files.update(w.acked_files)
            for n, h in w.pending_files.items():
                pending_files.setdefault(n, h)
            acked_cmds += w.acked_cmds
        finally:
            logs.append(m.output())
            m.stop()
        for n in w.acked_files:
            pending_files.pop(n, None)
    # The last remount: pending uploads drain, nothing ran twice.
    time.sleep(0.5)  # commands sent before the last kill finish on the server
    m = mount.Mount(tmp_path, server=orch, opts=opts)
    m.secrets.append(url)
    with m:
        assert sbx.wait_for(lambda: mount.read(m.path(".sandboxfs", "health")) == "ok\n",
                            timeout=60, interval=0.3), mount.read(m.path(".sandboxfs", "health"))
        got = server_hashes(url, list(acked_files) + list(pending_files))
        lost = [n for n, h in acked_files.items() if got.get(n) != h]
        assert not lost, f"seed {SEED}: acknowledged files lost: {lost[:5]}"
        undelivered = [n for n, h in pending_files.items() if got.get(n) != h]
        assert not undelivered, f"seed {SEED}: pending uploads not drained: {undelivered[:5]}"
        sent = fl.executed(orch, "crash")
        assert len(sent) == len(set(sent)), "a command reached the server twice"
        for c in acked_cmds:
            assert sent.count(c) == 1, f"an acknowledged command ran {sent.count(c)} times"
        ran = sbx.get(url, "cmds.log").text.split() if acked_cmds else []
        assert len(ran) == len(set(ran)), "a command ran twice"
        last = int(mount.read(m.path("crash", "last")))
        assert last >= len(sent), (last, len(sent))
        # the journal reads back in plain text and compacted (it stays small)
        size = os.path.getsize(m.state / "journal")
    logs.append(m.output())
    assert size < 1 << 20, f"journal {size} bytes: never compacted?"
    for out in logs:
        rep = fl.sanitizer_lines(out)
        assert not rep, rep[:10]
    print(f"\ncrash: seed {SEED}, {rounds} rounds, {len(acked_files)} acked files, "
          f"{len(pending_files)} pending drained, {len(acked_cmds)} acked commands, "
          f"{len(sent)} sent")
    return len(acked_files), len(acked_cmds)


def test_kill9_rounds(tmp_path, orch):
    files, cmds = crash_rounds(tmp_path, orch, int(os.environ.get("SANDBOXFS_CRASH_ROUNDS",
                                                                  "10")))
    assert files > 0 and cmds > 0


@pytest.mark.long
@pytest.mark.timeout_s(1500)
def test_kill9_fifty_rounds(tmp_path, orch):
    files, cmds = crash_rounds(tmp_path, orch, 50)
    assert files > 0 and cmds > 0


@pytest.mark.parametrize("upload", ["fsync", "command"])
def test_kill9_after_an_upload_of_a_file_still_written(mounts, upload):
    """A file still open for writing is uploaded (its fsync, or the flush
    before a command: the command sees what was written so far), the
    upload fails and stays pending, the writer goes on, and the daemon
    dies before the close. The cache file then holds more than its intent
    says, and that is no damage: a kill -9 keeps the page cache. After the
    remount those newest bytes are uploaded and health is ok again (before,
    they were set aside as incomplete and health never recovered)."""
    mounts.allow += ALLOW + [r"before a command", r"written on after its intent"]
    opts = ["listing_ttl=200"]
    m = mounts(opts=opts)
    os.mkdir(m.path("crash"))
    url = sandbox_url(mounts.orch, "crash")
    m.secrets.append(url)
    first, more = os.urandom(70000), os.urandom(50000)
    fd = os.open(m.path("crash", "workspace", "open.bin"),
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert os.write(fd, first) == len(first)
        sbx.set_faults(url, error_rate=1.0, routes="files")
        if upload == "fsync":
            with pytest.raises(OSError) as e:
                os.fsync(fd)
            assert e.value.errno == errno.EIO
        else:
            # run, or refused because the upload before it failed
            err, _ = ctl(m.path("crash", "ctl"), "true")
            assert err in (0, errno.EIO), fl.errname(err)
        assert os.write(fd, more) == len(more)
        m.kill9()
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    sbx.set_faults(url)
    m2 = mounts(opts=opts)
    m2.secrets.append(url)
    health = m2.path(".sandboxfs", "health")
    assert sbx.wait_for(lambda: mount.read(health) == "ok\n", timeout=30, interval=0.2), \
        mount.read(health)
    assert sbx.get(url, "open.bin").body == first + more
    assert "written on after its intent" in m2.output()


def _early_stat(m, key):
    for line in mount.read(m.path(".sandboxfs", "stats")).splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    raise KeyError(key)


@pytest.mark.parametrize("when", ["mid-put", "after a seek back"])
def test_kill9_while_an_early_put_is_on_the_wire(mounts, when):
    """A file written in order has its PUT on the wire before its close
    (early PUT, chunked), and the daemon dies before the close. The early
    PUT's intent was durable before its first byte (size unknown): after
    the remount it is never taken as done, and the cache file, which holds
    every byte written (a kill -9 keeps the page cache), is uploaded whole.
    The same when the early PUT had been abandoned (a seek back) and the
    close's whole PUT never came."""
    mounts.allow += ALLOW + [r"early upload"]
    m = mounts()
    os.mkdir(m.path("crash"))
    url = sandbox_url(mounts.orch, "crash")
    m.secrets.append(url)
    MiB = 1 << 20
    data = bytearray(os.urandom(8 * MiB))
    fd = os.open(m.path("crash", "workspace", "early.bin"),
                 os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(data), MiB):
            assert os.write(fd, data[off:off + MiB]) == MiB
        assert sbx.wait_for(lambda: _early_stat(m, "early_put_bytes") == len(data),
                            timeout=60, interval=0.1)
        if when == "after a seek back":
            more = os.urandom(4096)
            os.pwrite(fd, more, 4096)
            data[4096:8192] = more
            assert sbx.wait_for(lambda: _early_stat(m, "early_puts_running") == 0,
                                timeout=30, interval=0.1)
        m.kill9()
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    m2 = mounts()
    m2.secrets.append(url)
    health = m2.path(".sandboxfs", "health")
    assert sbx.wait_for(lambda: mount.read(health) == "ok\n", timeout=30, interval=0.2), \
        mount.read(health)
    assert sbx.get(url, "early.bin").body == bytes(data)
    assert "early upload" in m2.output()


# --- a full disk under the state directory ----------------------------------

@pytest.fixture
def small_fs(tmp_path):
    if os.getuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with mount.small_tmpfs(tmp_path, "3m") as d:
        yield d


def fill(path):
    """Fills the file system of path; returns the filler file."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_full_disk_under_the_state_dir(tmp_path, orch, small_fs):
    state = small_fs / "state"
    m = mount.Mount(tmp_path, server=orch, state=state, opts=["cache_max=64M"])
    with m:
        os.mkdir(m.path("full"))
        url = sandbox_url(orch, "full")
        m.secrets.append(url)
        d = m.path("full")
        ws = d / "workspace"
        assert fl.write_file(ws / "before.txt", b"acked before\n") == (0, 0)
        assert ctl(d / "ctl", "echo before")[0] == 0
        filler = fill(small_fs)
        n0 = len(fl.executed(orch, "full"))
        puts0 = sbx.stats(url)["puts"]
        # a big write cannot be cached: ENOSPC (or EIO) at write or close
        werr, cerr = fl.bounded(lambda: fl.write_file(ws / "big.bin", os.urandom(4 << 20)),
                                60, "write on a full disk")
        assert werr in (errno.ENOSPC, errno.EIO) or cerr in (errno.ENOSPC, errno.EIO), \
            (fl.errname(werr), fl.errname(cerr))
        # a command cannot be journaled: refused, never sent
        cerrs = []
        for i in range(3):
            err, _ = ctl(d / "ctl", f"echo full{i} >> full.txt; seq 1 100000")
            assert err in (errno.ENOSPC, errno.EIO, 0), fl.errname(err)
            cerrs.append(fl.errname(err))
        # the output could not be kept: empty, never a crash
        assert mount.read(d / "stdout") == ""
        assert m.proc.poll() is None
        # short commands until the journal itself has no room: that one is
        # refused at the write and never sent (journal first)
        refused = None
        for i in range(400):
            err, _ = ctl(d / "ctl", f"true {i}")
            if err:
                assert err in (errno.ENOSPC, errno.EIO), fl.errname(err)
                refused = f"true {i}"
                cerrs.append(fl.errname(err))
                break
        assert refused, "400 commands journaled on a full disk"
        time.sleep(0.3)
        assert refused not in fl.executed(orch, "full"), "sent without its journal record"
        print(f"\nfull disk: big write {fl.errname(werr)}/{fl.errname(cerr)}, commands {cerrs}")
        assert m.proc.poll() is None
        sent = fl.executed(orch, "full")[n0:]
        # whatever was sent is what the journal could hold; nothing twice
        assert len(sent) == len(set(sent))
        assert sbx.stats(url)["puts"] >= puts0
        # nothing acknowledged is lost
        assert sbx.get(url, "before.txt").body == b"acked before\n"
        os.unlink(filler)
        # room again: everything works, without a remount
        assert sbx.wait_for(lambda: fl.write_file(ws / "after.txt", b"after\n") == (0, 0),
                            timeout=20, interval=0.5)
        assert ctl(d / "ctl", "echo after")[0] == 0
        assert mount.read(d / "stdout") == "after\n"
        assert sbx.get(url, "after.txt").body == b"after\n"
    # and the state directory still mounts (journal intact)
    m2 = mount.Mount(tmp_path, server=orch, state=state)
    m2.secrets += m.secrets
    with m2:
        assert mount.read(m2.path("full", "workspace", "before.txt")) == "acked before\n"
        assert mount.read(m2.path("full", "stdout")) == "after\n"
        assert sbx.wait_for(lambda: mount.read(m2.path(".sandboxfs", "health")) == "ok\n",
                            timeout=30), mount.read(m2.path(".sandboxfs", "health"))
    m2.check_log(allow=[r"."])
