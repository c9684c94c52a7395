#!/usr/bin/python3
"""sandboxfs benchmarks (run through tests/bench/run BUILD_DIR).

Measures, on one machine and in one run, sandboxfs against
* "direct": the same requests sent to the same sandbox-server by the
  project's own C client (tests/bench/direct.c on backend/), one thread,
  keep-alive: the limit a FUSE layer over the contract can reach;
* "sshfs": Debian's sshfs over an sshd started here on 127.0.0.1 with its own
  host key, config and port, serving a directory of the same disk;
and reports the daemon's peak resident memory (VmHWM, reset per workload
through /proc/PID/clear_refs).

Every measurement is repeated (--reps) with the variants interleaved, the
order reversed on every other repetition (ABC CBA ...) so drift cancels; the
table shows medians and ratios of medians. Every server and mount started
here is stopped by its PID / unmounted in a finally block.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "lib"))

import mount  # noqa: E402
import sbx  # noqa: E402

MiB = 1 << 20
EATMYDATA = "/usr/lib/x86_64-linux-gnu/libeatmydata.so"
FUSERMOUNT = shutil.which("fusermount3") or "fusermount3"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def now():
    return time.perf_counter()


def sh(cmd, cwd=None, timeout=600, env=None):
    """Runs a command (list) quietly; raises with its output on failure."""
    p = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): "
                           f"{p.stdout.decode(errors='replace')[-1500:]}")
    return p.stdout.decode(errors="replace")


def timed_sh(cmd, cwd=None, env=None):
    t = now()
    sh(cmd, cwd=cwd, env=env)
    return now() - t


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- sshfs on 127.0.0.1 -----------------------------------------------------

class Sshfs:
    """An sshd of our own on 127.0.0.1 (own host key, client key and
    config) and an sshfs mount of `root` through it, with `opts` as
    further -o options."""

    def __init__(self, tmp, root, mnt, opts=()):
        self.tmp = Path(tmp)
        self.root = Path(root)
        self.mnt = Path(mnt)
        self.opts = list(opts)
        self.sshd = None
        self.sshfs = None

    def start(self):
        d = self.tmp
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        for k in ("host_key", "client_key"):
            sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / k)])
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir
        sftp = "/usr/lib/openssh/sftp-server"
        for attempt in range(5):
            self.port = free_port()
            (d / "sshd_config").write_text(
                f"ListenAddress 127.0.0.1\nPort {self.port}\n"
                f"HostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
                f"AuthorizedKeysFile {d / 'authorized_keys'}\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "UseDNS no\nLogLevel ERROR\n"
                f"Subsystem sftp {sftp}\n")
            self._sshd_log = open(d / "sshd.log", "ab")
            self.sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
                                         stdin=subprocess.DEVNULL, stdout=self._sshd_log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 10
            up = False
            while time.monotonic() < deadline and self.sshd.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                    up = True
                    break
                except OSError:
                    time.sleep(0.05)
            if up:
                break
            self._stop_sshd()
        else:
            raise RuntimeError("sshd did not start: " + (d / "sshd.log").read_text()[-1000:])
        self.mnt.mkdir(parents=True, exist_ok=True)
        user = os.environ.get("USER") or "root"
        self._sshfs_log = open(d / "sshfs.log", "ab")
        self.sshfs = subprocess.Popen(
            ["sshfs", "-f", f"{user}@127.0.0.1:{self.root}", str(self.mnt),
             "-p", str(self.port),
             "-o", f"IdentityFile={d / 'client_key'},StrictHostKeyChecking=no,"
                   "UserKnownHostsFile=/dev/null,BatchMode=yes,LogLevel=ERROR"]
            + [a for o in self.opts for a in ("-o", o)],
            stdin=subprocess.DEVNULL, stdout=self._sshfs_log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.sshfs.poll() is not None:
                raise RuntimeError("sshfs exited: " + (d / "sshfs.log").read_text()[-1000:])
            if mount.is_mounted(self.mnt):
                return self
            time.sleep(0.05)
        raise RuntimeError("the sshfs mount did not appear")

    def _stop_sshd(self):
        if self.sshd is not None:
            if self.sshd.poll() is None:
                self.sshd.send_signal(signal.SIGTERM)
                try:
                    self.sshd.wait(10)
                except subprocess.TimeoutExpired:
                    self.sshd.kill()
                    self.sshd.wait(5)
            self.sshd = None

    def stop(self):
        try:
            if mount.is_mounted(self.mnt):
                r = subprocess.run([FUSERMOUNT, "-u", str(self.mnt)], timeout=30,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if r.returncode != 0:
                    subprocess.run([FUSERMOUNT, "-u", "-z", str(self.mnt)], timeout=30)
            if self.sshfs is not None:
                try:
                    self.sshfs.wait(10)
                except subprocess.TimeoutExpired:
                    self.sshfs.send_signal(signal.SIGTERM)
                    self.sshfs.wait(10)
                self.sshfs = None
        finally:
            self._stop_sshd()


# --- the bench environment ----------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.build = Path(args.build).resolve()
        self.reps = args.reps
        self.tmp = Path(tempfile.mkdtemp(prefix="sandboxfs-bench-", dir=args.tmp))
        os.chmod(self.tmp, 0o700)
        self.direct_bin = self.build / "tests" / "bench" / "bench-direct"
        self.rows = []
        self.notes = []
        self.server = self.mnt = self.ssh = None

    # setup / teardown
    def start(self):
        os.environ["SANDBOXFS_BUILD"] = str(self.build)
        (self.tmp / "srv").mkdir()
        self.server = sbx.Server(tmp=self.tmp / "srv")
        self.server.start()
        self.ws = self.server.workspace  # the sandbox's workspace on disk
        self.url_file = self.tmp / "url"
        fd = os.open(self.url_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (self.server.url + "\n").encode())
        os.close(fd)
        fd = os.open(self.tmp / "sandboxes", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, f"bench {self.server.url}\n".encode())
        os.close(fd)
        env = None
        if self.args.eatmydata:  # diagnosis: what the syncs cost
            env = {"LD_PRELOAD": EATMYDATA}
            self.notes.append("DIAGNOSTIC RUN: sandboxfs ran under eatmydata "
                              "(fsync/fdatasync are no-ops): not the product's figures")
        self.mnt = mount.Mount(self.tmp, sandboxes=self.tmp / "sandboxes",
                               opts=self.args.opt or (), env=env)
        self.mnt.start()
        self.sb = self.mnt.mnt / "bench"
        self.mws = self.sb / "workspace"
        if not self.args.no_sshfs:
            self.sroot = self.tmp / "sshroot"
            self.sroot.mkdir()
            self.ssh = Sshfs(self.tmp / "ssh", self.sroot, self.tmp / "sshmnt")
            self.ssh.start()
            self.smnt = self.ssh.mnt
        self.local = self.tmp / "local"
        self.local.mkdir()

    def stop(self):
        errors = []
        for what, f in (("sshfs", lambda: self.ssh and self.ssh.stop()),
                        ("sandboxfs", lambda: self.mnt and self.mnt.stop()),
                        ("server", lambda: self.server and self.server.stop())):
            try:
                f()
            except Exception as e:  # keep stopping the others
                errors.append(f"{what}: {e}")
        if self.mnt is not None:
            out = self.mnt.output()
            bad = [ln for ln in out.splitlines() if "error" in ln.lower() or "warning" in ln.lower()]
            if bad:
                self.notes.append("sandboxfs printed: " + " | ".join(bad[:5]))
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        for e in errors:
            log("bench: stopping", e)

    # helpers
    def direct(self, *args, url_file=None):
        env = dict(os.environ, SANDBOX_URL_FILE=str(url_file or self.url_file))
        out = sh([str(self.direct_bin)] + [str(a) for a in args], env=env)
        first = out.splitlines()[0]
        us = [int(x) for x in first.split("us=")[1].split()[0].split(",")]
        extra = dict(kv.split("=", 1) for ln in out.splitlines()[1:] for kv in ln.split() if "=" in kv)
        return [u / 1e6 for u in us], extra

    def ctl(self, command="true"):
        """One command through ctl; also revalidates the mount's caches."""
        fd = os.open(self.sb / "ctl", os.O_WRONLY)
        try:
            os.write(fd, command.encode() + b"\n")
        finally:
            os.close(fd)

    def stats(self):
        st = {}
        for ln in (self.mnt.mnt / ".sandboxfs" / "stats").read_text().splitlines():
            k, _, v = ln.partition(" ")
            try:
                st[k] = int(v)
            except ValueError:
                pass
        return st

    def hwm_reset(self):
        with open(f"/proc/{self.mnt.pid}/clear_refs", "w") as f:
            f.write("5")  # resets the peak RSS to the current RSS

    def hwm_mib(self):
        for ln in open(f"/proc/{self.mnt.pid}/status"):
            if ln.startswith("VmHWM:"):
                return int(ln.split()[1]) / 1024
        return float("nan")

    def interleave(self, variants, rep):
        """variants: list of (name, fn(rep) -> value); ABC on even
        repetitions, CBA on odd ones."""
        order = variants if rep % 2 == 0 else list(reversed(variants))
        out = {}
        for name, fn in order:
            try:
                out[name] = fn(rep)
            except Exception as e:
                raise RuntimeError(f"{name}, repetition {rep}: {e}") from e
        return out

    def measure(self, variants, setup=None):
        samples = {name: [] for name, _ in variants}
        for rep in range(self.reps):
            if setup:
                setup(rep)
            for k, v in self.interleave(variants, rep).items():
                samples[k].append(v)
        return samples

    def row(self, name, samples, unit, kind="time", target=None, target_sshfs=True,
            rss=None, note=""):
        """kind "time": lower is better (seconds); "rate": higher is better
        (bytes/s). target: ("le", x) on sandboxfs/direct time, ("ge", x) on
        sandboxfs/direct rate, ("abs_ge", bytes_per_s) on sandboxfs alone."""
        med = {k: statistics.median(v) for k, v in samples.items() if v}
        self.rows.append(dict(name=name, med=med, unit=unit, kind=kind, target=target,
                              target_sshfs=target_sshfs, rss=rss, note=note,
                              samples={k: v for k, v in samples.items()}))
        log(f"  {name}: " + ", ".join(f"{k}={fmt(v, unit)}" for k, v in med.items()))

    # --- workloads ---------------------------------------------------------

    def ctl_loop(self, ctl):
        """A measure: the median time of --commands `echo true > ctl`."""
        k = self.args.commands

        def fn(rep):
            lat = []
            for _ in range(k):
                t = now()
                fd = os.open(ctl, os.O_WRONLY)
                os.write(fd, b"true\n")
                os.close(fd)
                lat.append(now() - t)
            return statistics.median(lat)
        return fn

    def roundtrip_variants(self):
        k = self.args.commands
        sfs = self.ctl_loop(self.sb / "ctl")

        def direct(rep):
            us, _ = self.direct("exec", k, "true")
            return statistics.median(us)

        return [("sandboxfs", sfs), ("direct", direct)]

    def w_roundtrip(self):
        log("1. command round trip")
        self.ctl()  # first command: connection, seat
        self.hwm_reset()
        s = self.measure(self.roundtrip_variants())
        self.row("command round trip `echo true > ctl`", s, "ms", target=("le", 1.25),
                 target_sshfs=False, rss=self.hwm_mib())

        # what one FUSE request costs on this machine: a getxattr the
        # daemon answers ENODATA at once
        probe = self.mws / "xattr-probe"
        probe.write_bytes(b"x")

        def getxattr_loop(path):
            n = 2000
            t = now()
            for _ in range(n):
                try:
                    os.getxattr(path, "user.bench-none")
                except OSError:
                    pass
            return (now() - t) / n

        local = self.tmp / "xattr-probe"
        local.write_bytes(b"x")
        s = self.measure([("sandboxfs", lambda r: getxattr_loop(probe)),
                          ("local disk", lambda r: getxattr_loop(local))])
        self.row("one FUSE request (getxattr → ENODATA)", s, "ms", target_sshfs=False,
                 note="the floor under every per-file operation: the kernel-daemon round trip")

    def transfer_fns(self, name, src, size, chunk):
        """The four measures of a whole-file workload under name/: a timed
        write of size bytes (its close is the upload) and read of a file
        through a mount, and the direct client's PUT of src and GET (rates
        in bytes/s)."""
        def write_file(path):
            t = now()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for _ in range(size // MiB):
                os.write(fd, chunk)
            os.close(fd)  # the upload: one PUT of the whole file
            return size / (now() - t)

        def read_file(path):
            t = now()
            fd = os.open(path, os.O_RDONLY)
            n = 0
            while True:
                b = os.read(fd, MiB)
                if not b:
                    break
                n += len(b)
            os.close(fd)
            assert n == size, (path, n)
            return size / (now() - t)

        def direct_put(rep):
            us, _ = self.direct("put", src, f"{name}/d{rep}")
            return size / us[0]

        def direct_get(rep):
            out = self.tmp / f"{name}.get"
            us, _ = self.direct("get", f"{name}/c{rep}", out)
            os.unlink(out)
            return size / us[0]

        return write_file, read_file, direct_put, direct_get

    def w_large(self):
        size = self.args.large_mib * MiB
        log(f"2. large files ({self.args.large_mib} MiB)")
        chunk = os.urandom(MiB)
        src = self.tmp / "large.src"
        with open(src, "wb") as f:
            for _ in range(size // MiB):
                f.write(chunk)

        write_file, read_file, direct_put, direct_get = self.transfer_fns("large", src,
                                                                          size, chunk)

        (self.ws / "large").mkdir()
        if self.ssh:
            (self.sroot / "large").mkdir()
        self.ctl()
        wvars = [("sandboxfs", lambda r: write_file(self.mws / "large" / f"w{r}")),
                 ("direct", direct_put)]
        rvars = [("sandboxfs", lambda r: read_file(self.mws / "large" / f"c{r}")),
                 ("direct", direct_get)]
        warm = [("sandboxfs", lambda r: read_file(self.mws / "large" / f"c{r}"))]
        if self.ssh:
            wvars.append(("sshfs", lambda r: write_file(self.smnt / "large" / f"w{r}")))
            rvars.append(("sshfs", lambda r: read_file(self.smnt / "large" / f"c{r}")))
            warm.append(("sshfs", lambda r: read_file(self.smnt / "large" / f"c{r}")))
        def read_after_command(r):
            path = self.mws / "large" / f"c{r}"
            # the first command lists the names the phases before made (all
            # is fetched again after it), the second changes nothing: its
            # list spares the copy
            self.ctl()
            read_file(path)
            self.ctl()
            return read_file(path)

        # a direct client has no copy to keep: it GETs again
        after = [("sandboxfs", read_after_command), ("direct", direct_get)]
        ws, rs, hs, afs = ({n: [] for n, _ in v} for v in (wvars, rvars, warm, after))
        rss = {"write": 0.0, "cold": 0.0, "warm": 0.0, "after": 0.0}
        for rep in range(self.reps):
            # the files to read cold: new names, written on the servers' disks
            shutil.copyfile(src, self.ws / "large" / f"c{rep}")
            if self.ssh:
                shutil.copyfile(src, self.sroot / "large" / f"c{rep}")
            self.ctl()  # the mount sees the new names
            for phase, vars_, acc in (("write", wvars, ws), ("cold", rvars, rs),
                                      ("warm", warm, hs), ("after", after, afs)):
                self.hwm_reset()
                for k, v in self.interleave(vars_, rep).items():
                    acc[k].append(v)
                rss[phase] = max(rss[phase], self.hwm_mib())
            # unlink through the mount so its cache lets the files go
            for n in ("w", "c"):
                os.unlink(self.mws / "large" / f"{n}{rep}")
            (self.ws / "large" / f"d{rep}").unlink()
            if self.ssh:
                for n in ("w", "c"):
                    os.unlink(self.smnt / "large" / f"{n}{rep}")
        mib = self.args.large_mib
        self.row(f"{mib} MiB sequential write + close", ws, "MB/s", kind="rate",
                 target=("ge", 0.8), rss=rss["write"])
        self.row(f"{mib} MiB cold read", rs, "MB/s", kind="rate", target=("ge", 0.8),
                 rss=rss["cold"])
        self.row(f"{mib} MiB warm re-read", hs, "MB/s", kind="rate",
                 target=("abs_ge", 1e9), rss=rss["warm"])
        self.row(f"{mib} MiB re-read after a command that did not change it", afs, "MB/s",
                 kind="rate", rss=rss["after"], target_sshfs=False,
                 note="`true` through ctl, then the read (after a first command and "
                      "read that take in what the phases before changed); direct: a GET "
                      "(a client without a cache fetches again)")
        src.unlink()

    def w_huge(self):
        """A file four times the default cache (1 GiB), written and read
        cold through the mount with the default options: it streams
        through local disk (bounded by the state directory's free space,
        not by cache_max) and the daemon's memory stays flat."""
        size = self.args.huge_mib * MiB
        log(f"2b. a file larger than the cache ({self.args.huge_mib} MiB)")
        st = os.statvfs(self.tmp)
        free = st.f_bavail * st.f_frsize
        # the source, the server's copies, the cache file and the direct GET's
        need = 5 * size + (2 << 30)
        if free < need:
            self.notes.append(f"workload huge skipped: {need >> 30} GiB free needed under "
                              f"{self.tmp.parent} (--tmp), {free >> 30} GiB there")
            return
        chunk = os.urandom(MiB)
        src = self.tmp / "huge.src"
        with open(src, "wb") as f:
            for _ in range(size // MiB):
                f.write(chunk)

        write_file, read_file, direct_put, direct_get = self.transfer_fns("huge", src,
                                                                          size, chunk)

        (self.ws / "huge").mkdir()
        if self.ssh:
            (self.sroot / "huge").mkdir()
        self.ctl()
        wvars = [("sandboxfs", lambda r: write_file(self.mws / "huge" / f"w{r}")),
                 ("direct", direct_put)]
        rvars = [("sandboxfs", lambda r: read_file(self.mws / "huge" / f"c{r}")),
                 ("direct", direct_get)]
        if self.ssh:
            wvars.append(("sshfs", lambda r: write_file(self.smnt / "huge" / f"w{r}")))
            rvars.append(("sshfs", lambda r: read_file(self.smnt / "huge" / f"c{r}")))
        ws, rs = ({n: [] for n, _ in v} for v in (wvars, rvars))
        rss = {"write": 0.0, "cold": 0.0}
        kept = []
        reps = self.args.huge_reps
        for rep in range(reps):
            shutil.copyfile(src, self.ws / "huge" / f"c{rep}")
            if self.ssh:
                shutil.copyfile(src, self.sroot / "huge" / f"c{rep}")
            self.ctl()
            for phase, vars_, acc in (("write", wvars, ws), ("cold", rvars, rs)):
                self.hwm_reset()
                for k, v in self.interleave(vars_, rep).items():
                    acc[k].append(v)
                rss[phase] = max(rss[phase], self.hwm_mib())
                # closed and clean: the cache is back within cache_max
                time.sleep(0.2)
                kept.append(self.stats().get("cache_bytes", -1))
            assert (self.ws / "huge" / f"w{rep}").stat().st_size == size
            for n in ("w", "c"):
                os.unlink(self.mws / "huge" / f"{n}{rep}")
            (self.ws / "huge" / f"d{rep}").unlink()
            if self.ssh:
                for n in ("w", "c"):
                    os.unlink(self.smnt / "huge" / f"{n}{rep}")
        mib = self.args.huge_mib
        cache = self.stats().get("cache_max_bytes", 0)
        over = " (> cache_max)" if size > cache else ""
        note = (f"cache_max {cache >> 20} MiB (the default); {reps} repetition(s); the "
                f"mount's cache files after each close: at most {max(kept) >> 20} MiB")
        self.row(f"{mib} MiB sequential write + close{over}", ws, "MB/s", kind="rate",
                 rss=rss["write"], note=note)
        self.row(f"{mib} MiB cold read{over}", rs, "MB/s", kind="rate", rss=rss["cold"])
        src.unlink()

    def w_small(self):
        n, size = self.args.files, 4096
        log(f"3. small files ({n} x 4 KiB)")
        data = os.urandom(size)

        def create_all(d):
            t = now()
            for i in range(n):
                fd = os.open(d / f"f{i:04d}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, data)
                os.close(fd)
            return now() - t

        def read_all(d):
            t = now()
            for i in range(n):
                fd = os.open(d / f"f{i:04d}", os.O_RDONLY)
                got = os.read(fd, 65536)
                os.close(fd)
                assert len(got) == size
            return now() - t

        def sfs_create(rep):
            os.mkdir(self.mws / f"sa{rep}")
            return create_all(self.mws / f"sa{rep}")

        def ssh_create(rep):
            os.mkdir(self.smnt / f"ss{rep}")
            return create_all(self.smnt / f"ss{rep}")

        def direct_create(rep):
            us, _ = self.direct("put-all", n, size, f"sd{rep}")
            return us[0]

        def direct_read(rep):
            us, _ = self.direct("get-all", n, f"sa{rep}", self.tmp / "small.get")
            return us[0]

        def sfs_read(rep):
            # files this mount never saw (the direct PUTs); the
            # command before revalidates its listings
            self.ctl()
            return read_all(self.mws / f"sd{rep}")

        def ssh_read(rep):
            return read_all(self.smnt / f"sc{rep}")

        def setup_read(rep):
            if self.ssh:  # fresh files for sshfs too, written on its disk
                shutil.copytree(self.ws / f"sd{rep}", self.sroot / f"sc{rep}")

        cvars = [("sandboxfs", sfs_create), ("direct", direct_create)]
        rvars = [("sandboxfs", sfs_read), ("direct", direct_read)]
        if self.ssh:
            cvars.append(("sshfs", ssh_create))
            rvars.append(("sshfs", ssh_read))
        cs, rs, warm = {k: [] for k, _ in cvars}, {k: [] for k, _ in rvars}, {"sandboxfs": []}
        rss = [0.0, 0.0]
        for rep in range(self.reps):
            self.ctl()
            self.hwm_reset()
            for k, v in self.interleave(cvars, rep).items():
                cs[k].append(v)
            warm["sandboxfs"].append(read_all(self.mws / f"sa{rep}"))
            rss[0] = max(rss[0], self.hwm_mib())
            setup_read(rep)
            self.hwm_reset()
            for k, v in self.interleave(rvars, rep).items():
                rs[k].append(v)
            rss[1] = max(rss[1], self.hwm_mib())
        self.row(f"{n} x 4 KiB create+write+close", cs, "s", target=("le", 1.5), rss=rss[0])
        self.row(f"{n} x 4 KiB read back (cold)", rs, "s", target=("le", 1.5), rss=rss[1])
        self.row(f"{n} x 4 KiB read back (own, cached)", warm, "s", target_sshfs=False,
                 note="right after writing them, from the mount's cache; no direct equivalent")

    def w_metadata(self):
        n, tree = self.args.dir_entries, self.args.tree_files
        log(f"4. metadata (ls -l of {n} entries, find over {tree} files)")

        def make_dir(root, name):
            d = root / name
            d.mkdir()
            for i in range(n):
                with open(d / f"e{i:05d}", "wb") as f:
                    f.write(b"x" * (i % 100))

        per_dir, subdirs = 100, 10
        tops = max(1, tree // (per_dir * subdirs))

        def make_tree(root, name):
            for a in range(tops):
                for b in range(subdirs):
                    d = root / name / f"d{a:02d}" / f"s{b:02d}"
                    d.mkdir(parents=True)
                    for i in range(per_dir):
                        open(d / f"f{i:03d}", "wb").close()

        listings = []

        def sfs_ls(rep):
            d = self.mws / f"ls{rep}"
            os.stat(d)  # the lookup of the directory itself is not counted
            s0 = self.stats()
            t = timed_sh(["ls", "-l", str(d)])
            s1 = self.stats()
            listings.append((s1.get("listings_fetched", 0) - s0.get("listings_fetched", 0),
                             s1.get("requests_file", 0) - s0.get("requests_file", 0)))
            return t

        def direct_ls(rep):
            us, extra = self.direct("list", 1, f"ls{rep}")
            assert int(extra["entries"]) == n, extra
            return us[0]

        def setup_ls(rep):
            make_dir(self.ws, f"ls{rep}")
            make_dir(self.local, f"ls{rep}")
            if self.ssh:
                make_dir(self.sroot, f"ls{rep}")
            self.ctl()

        lvars = [("sandboxfs", sfs_ls), ("direct", direct_ls)]
        if self.ssh:
            lvars.append(("sshfs", lambda r: timed_sh(["ls", "-l", str(self.smnt / f"ls{r}")])))
        # ls's own work (sorting, formatting 10,000 lines) on the local
        # disk: a floor no file system under it can go below
        lvars.append(("local disk", lambda r: timed_sh(["ls", "-l", str(self.local / f"ls{r}")])))
        self.hwm_reset()
        s = self.measure(lvars, setup=setup_ls)
        req = sorted(set(listings))
        self.row(f"ls -l of a {n}-entry directory", s, "ms", target=("le", 2.0),
                 rss=self.hwm_mib(),
                 note="local disk: the same ls -l on the local disk; "
                      "requests per ls -l (listings, file requests): " +
                      ", ".join(f"{a}, {b}" for a, b in req))
        self.listing_requests = req

        expect = tops * subdirs * (per_dir + 1) + tops + 1

        def find_in(root):
            def fn(rep):
                t = now()
                out = sh(["find", str(root / f"t{rep}")])
                t = now() - t
                assert out.count("\n") == expect, (out.count("\n"), expect)
                return t
            return fn

        def direct_walk(rep):
            us, extra = self.direct("walk", f"t{rep}")
            return us[0]

        def setup_tree(rep):
            make_tree(self.ws, f"t{rep}")
            make_tree(self.local, f"t{rep}")
            if self.ssh:
                make_tree(self.sroot, f"t{rep}")
            self.ctl()

        fvars = [("sandboxfs", find_in(self.mws)), ("direct", direct_walk)]
        if self.ssh:
            fvars.append(("sshfs", find_in(self.smnt)))
        fvars.append(("local disk", find_in(self.local)))
        self.hwm_reset()
        s = self.measure(fvars, setup=setup_tree)
        self.row(f"find over {tops * subdirs * per_dir} files", s, "ms", target=("le", 2.0),
                 rss=self.hwm_mib(),
                 note="direct: one listing per directory, sequential; local disk: "
                      "the same find on the local disk")

        # every command revalidates what the mount has shown so far
        shown = self.reps * (n + tops * subdirs * (per_dir + 1))
        s = self.measure(self.roundtrip_variants())
        self.row(f"command round trip after listing {shown:,} entries", s, "ms",
                 target=("le", 1.25), target_sshfs=False, rss=self.hwm_mib())

    # --- scale: one mount, many sandboxes, many commands at once -------------
    def orch_mount(self, name, n, faults=False):
        """A local orchestrator with n sandboxes (created through its API,
        so foreign to the mount but usable) and a mount of it with its
        defaults. With faults, every sandbox also serves /_admin/stats.
        Returns (server, mount, client); the caller stops both."""
        (self.tmp / name).mkdir()
        srv = sbx.Server(orchestrator=True, faults=faults, tmp=self.tmp / name)
        srv.start()
        c = srv.client()
        for i in range(n):
            r = c.create(pool="default", id=f"s{i:05d}")
            if r.status != 201:
                srv.stop()
                raise RuntimeError(f"create s{i:05d}: {r.status}")
        m = mount.Mount(self.tmp / name, server=srv)
        m.start()
        return srv, m, c

    @staticmethod
    def proc_status(pid):
        """Threads, VmRSS and VmHWM (KiB) of a process, and fds: the
        descriptors it has open."""
        out = {}
        for ln in open(f"/proc/{pid}/status"):
            k, _, v = ln.partition(":")
            if k in ("Threads", "VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
        return out

    @staticmethod
    def cpu_seconds(pid):
        """User and system time of a process and of the children it has
        waited for (/proc/PID/stat: utime, stime, cutime, cstime). The
        sandbox server waits for each command's shell, which waits for
        what it started: so this is what a command cost the sandbox."""
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def nofile_limit(pid):
        for ln in open(f"/proc/{pid}/limits"):
            if ln.startswith("Max open files"):
                return ln.split()[3]
        return "?"

    @staticmethod
    def mount_options(m):
        """The -o names a mount was started with (values left out)."""
        cmd = m.command()
        o = cmd[cmd.index("-o") + 1].split(",") if "-o" in cmd else []
        return [x.split("=", 1)[0] for x in o]

    def w_scale(self):
        """Many commands at once across many sandboxes of one mount: the
        wall time against the same executes sent straight to the sandboxes
        in parallel, and how fast `ls`, `stat` and `cat status` of sandboxes
        that run nothing answer meanwhile, each against the idle mount."""
        import resource
        import threading
        n, k, secs = self.args.scale_sandboxes, self.args.scale_commands, self.args.scale_seconds
        if n <= k:
            raise RuntimeError("scale: needs more sandboxes than commands (--scale-sandboxes)")
        log(f"bench: scale: {n} sandboxes, {k} commands of {secs} s")
        # the local orchestrator holds three descriptors per sandbox, and
        # the direct variant one connection per command: more than the
        # usual soft limit of 1024 (the mount inherits it too; see
        # --scale-daemon-nofile to give it less)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard == resource.RLIM_INFINITY else min(hard, 1 << 16)
        if soft != resource.RLIM_INFINITY and want > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        srv, m, c = self.orch_mount("scale", n, faults=True)
        peak = {"Threads": 0, "VmHWM": 0, "fds": 0}
        limit = "?"
        try:
            if self.args.scale_daemon_nofile:
                resource.prlimit(m.pid, resource.RLIMIT_NOFILE,
                                 (self.args.scale_daemon_nofile,
                                  resource.prlimit(m.pid, resource.RLIMIT_NOFILE)[1]))
            root = m.mnt
            if len(os.listdir(root)) < n:
                raise RuntimeError("the mount does not list every sandbox")
            # probed: up to four sandboxes that run nothing, in turn
            others = [root / f"s{i:05d}" for i in range(max(k, n - 4), n)]
            for o in others:
                (o / "workspace" / "f").write_text("x")
            calls = [("ls", "`ls` of another workspace",
                      lambda o: os.listdir(o / "workspace")),
                     ("stat", "`stat` of a file there",
                      lambda o: os.stat(o / "workspace" / "f")),
                     ("cat status", "`cat` of its status",
                      lambda o: (o / "status").read_bytes())]
            idle = {key: [] for key, _, _ in calls}
            busy = {key: [] for key, _, _ in calls}

            def probe_once(into):
                for o in others:
                    for key, _, f in calls:
                        t = now()
                        f(o)
                        into[key].append(now() - t)

            for _ in range(3):
                probe_once(idle)  # warm: every name looked up once
            idle = {key: [] for key in idle}
            idle_st = self.proc_status(m.pid)
            limit = self.nofile_limit(m.pid)
            wall = {"sandboxfs": [], "direct": []}
            # what the commands cost the sandboxes' side (the local
            # orchestrator's process: it waits for every command's shell)
            sandbox_cpu = {"sandboxfs": [], "direct": []}
            spawn = []
            urls = [c.sandbox(f"s{i:05d}").json()["url"] for i in range(k)]
            admin = [sbx.Client(u) for u in urls]

            def counts():
                out = []
                for a in admin:
                    st = a.stats()
                    out.append((st["executes"], st["commands"], st["busy"]))
                return out

            for rep in range(self.reps):
                for _ in range(10):
                    probe_once(idle)
                    time.sleep(0.02)
                before = counts()
                # through the mount: one writer per sandbox, all at once,
                # threads as the direct side's (`echo > ctl`'s own open,
                # write and close; 500 processes from this Python cost
                # 40 ms each to start on a small VM, which is not the
                # mount's time)
                wrote = [None] * k
                ended = [0.0] * k

                def write_ctl(i):
                    try:
                        with open(root / f"s{i:05d}" / "ctl", "w") as f:
                            f.write(f"sleep {secs}\n")
                        wrote[i] = 0
                    except OSError as e:
                        wrote[i] = e
                    ended[i] = now()
                cpu0 = self.cpu_seconds(srv.pid)
                t0 = now()
                writers = [threading.Thread(target=write_ctl, args=(i,)) for i in range(k)]

                def start_writers():
                    for t in writers:
                        t.start()
                    spawn.append(now() - t0)
                # started from a thread of their own, so that the probes
                # below run while they start too (a loaded machine starts
                # 500 threads slowly)
                starter = threading.Thread(target=start_writers)
                starter.start()
                time.sleep(min(1.0, secs / 4))
                while starter.is_alive() or any(t.is_alive() for t in writers):
                    st = self.proc_status(m.pid)
                    peak = {key: max(peak[key], st[key]) for key in peak}
                    probe_once(busy)
                    time.sleep(0.1)
                starter.join()
                for t in writers:
                    t.join(timeout=secs * 20)
                # until the last write returned, not the probe loop's end
                wall["sandboxfs"].append(max(ended) - t0)
                sandbox_cpu["sandboxfs"].append((self.cpu_seconds(srv.pid) - cpu0) / k)
                bad = sum(1 for w in wrote if w != 0) + sum(
                    1 for i in range(k) if (root / f"s{i:05d}" / "exit").read_text().strip() != "0")
                if bad:
                    raise RuntimeError(f"{bad} of {k} commands failed through the mount")
                # the sandboxes' side: each received one execute, none a 409
                after = counts()
                odd = [i for i in range(k)
                       if (after[i][0] - before[i][0], after[i][1] - before[i][1],
                           after[i][2] - before[i][2]) != (1, 1, 0)]
                if odd:
                    raise RuntimeError(f"{len(odd)} sandboxes did not receive exactly one "
                                       f"execute (s{odd[0]:05d}: {before[odd[0]]} -> "
                                       f"{after[odd[0]]})")
                # direct: the same executes, one thread each, all at once
                results = [None] * k

                def one(i):
                    results[i] = sbx.execute(urls[i], f"sleep {secs}", timeout_seconds=secs * 4)
                threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
                cpu0 = self.cpu_seconds(srv.pid)
                t0 = now()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall["direct"].append(now() - t0)
                sandbox_cpu["direct"].append((self.cpu_seconds(srv.pid) - cpu0) / k)
                if any(r is None or r.status != 200 for r in results):
                    raise RuntimeError("a direct execute failed")
            end_st = self.proc_status(m.pid)
            opts = ", ".join(self.mount_options(m))
            cpu = {v: statistics.median(s) for v, s in sandbox_cpu.items()}
            ncpu = os.cpu_count()
            self.row(f"{k} commands of {secs} s across {n} sandboxes, at once (wall)", wall,
                     "s", target=("le", 1.5), target_sshfs=False,
                     rss=peak["VmHWM"] / 1024,
                     note=f"direct: the same {k} executes sent to the sandboxes in parallel; "
                          f"starting the {k} writer threads took {statistics.median(spawn):.2f} s "
                          f"(median, inside the wall time); CPU of the sandboxes' side per "
                          f"command (the orchestrator process and every process it ran, "
                          f"medians): {fmt(cpu['sandboxfs'], 'ms')} through the mount, "
                          f"{fmt(cpu['direct'], 'ms')} direct (for the {k} commands on "
                          f"{ncpu} CPUs: {cpu['sandboxfs'] * k / ncpu:.1f} s and "
                          f"{cpu['direct'] * k / ncpu:.1f} s of each CPU); every exit file "
                          f"says 0 and every sandbox received one execute and answered no 409; "
                          f"daemon with {n} idle sandboxes: {idle_st['Threads']} threads, "
                          f"{idle_st['VmRSS'] / 1024:.0f} MiB, {idle_st['fds']} fds; while "
                          f"they ran, at most: {peak['Threads']} threads, "
                          f"{peak['VmHWM'] / 1024:.0f} MiB (VmHWM), {peak['fds']} fds "
                          f"(its limit: {limit}); after them: {end_st['Threads']} threads, "
                          f"{end_st['fds']} fds; mount options: {opts} only, the rest "
                          f"(max_threads too) at their defaults")
            for key, name, _ in calls:
                b = sorted(busy[key])
                self.row(f"{name} while they run", {"sandboxfs": busy[key],
                                                    "direct": idle[key]},
                         "ms", target=("le", 2), target_sshfs=False,
                         note=f"direct column: the same call on the idle mount "
                              f"({len(idle[key])} samples); {len(b)} samples during the "
                              f"runs, 90th percentile "
                              f"{fmt(b[int(0.9 * (len(b) - 1))] if b else None, 'ms')}, "
                              f"slowest {fmt(b[-1] if b else None, 'ms')}; across "
                              f"{len(others)} sandboxes that run nothing")
        except Exception as e:
            # say what the daemon was at: out of descriptors, it answers
            # some requests with errors and may end
            printed = m.output().strip().splitlines()[-1:] or ["nothing"]
            rc = m.proc.poll() if m.proc else None
            if rc is None:
                try:
                    how = (f"alive with {len(os.listdir(f'/proc/{m.pid}/fd'))} fds open "
                           f"(its limit: {self.nofile_limit(m.pid)})")
                except OSError:
                    how = "alive"
            else:
                how = ("killed by " + signal.Signals(-rc).name if rc < 0
                       else f"ended with exit code {rc}")
            raise RuntimeError(f"{e}; the daemon: {how}, at most {peak['fds']} fds seen; "
                               f"it last printed: {printed[0][:200]}") from e
        finally:
            m.stop()
            srv.stop()

    def w_memory(self):
        """The daemon's resident memory with many idle sandboxes, then after
        a find over a large workspace tree."""
        n, entries = self.args.scale_sandboxes, self.args.memory_entries
        log(f"bench: memory: {n} sandboxes, a find over {entries} entries")
        srv, m, c = self.orch_mount("memory", n)
        try:
            root = m.mnt
            for i in range(n):
                os.stat(root / f"s{i:05d}" / "status")
            idle = self.proc_status(m.pid)
            sb = root / "s00000"
            dirs = max(1, entries // 1000)
            fd = os.open(sb / "ctl", os.O_WRONLY)
            try:
                os.write(fd, (f"for i in $(seq {dirs}); do mkdir d$i && (cd d$i && "
                              f"seq -f f%04g 1000 | xargs touch); done\n").encode())
            finally:
                os.close(fd)
            t = now()
            out = subprocess.run(["find", str(sb / "workspace")], capture_output=True,
                                 text=True, timeout=1800).stdout
            took = now() - t
            found = out.count("\n")
            after = self.proc_status(m.pid)
            if found < dirs * 1000:
                raise RuntimeError(f"find saw {found} entries of {dirs * 1000}")
            self.row(f"daemon RSS: {n} idle sandboxes", {"sandboxfs": [idle["VmRSS"] * 1024]},
                     "MiB", kind="size", target_sshfs=False,
                     note=f"{idle['Threads']} threads; target < 128 MiB")
            self.row(f"daemon RSS after find over {found:,} entries",
                     {"sandboxfs": [after["VmHWM"] * 1024]}, "MiB", kind="size",
                     target_sshfs=False,
                     note=f"find took {took:.1f} s; target < 128 MiB "
                          f"({'met' if after['VmHWM'] < 128 * 1024 else 'missed'})")
        finally:
            m.stop()
            srv.stop()

    def w_stream(self):
        """Output while a command runs: bytes received per byte of a large
        streamed output, and what streaming adds to `echo true > ctl`
        (against a second mount of the same sandbox with -o stream=no)."""
        mib = self.args.stream_mib
        n = mib << 20
        log(f"bench: stream: {mib} MiB output, echo true with stream on and off")
        self.ctl()
        moved, took = [], []
        for rep in range(self.reps):
            st0 = self.stats()
            t = now()
            # written over a few seconds, read by a follower meanwhile (the
            # poller runs only while someone reads)
            writer = subprocess.Popen(
                ["sh", "-c", f"echo 'for i in $(seq {mib}); do head -c 1048576 /dev/zero; "
                             f"sleep 0.02; done' > {self.sb}/ctl"])
            time.sleep(0.3)
            follower = subprocess.Popen(["cat", str(self.sb / "stdout")],
                                        stdout=subprocess.DEVNULL)
            if writer.wait(timeout=600) != 0:
                raise RuntimeError("the streamed command failed")
            follower.wait(timeout=600)
            took.append(now() - t)
            st1 = self.stats()
            got = os.stat(self.sb / "stdout").st_size
            if got != n:
                raise RuntimeError(f"stdout has {got} bytes of {n}")
            moved.append((st1["bytes_in"] - st0["bytes_in"]) / n)
        self.row(f"{mib} MiB streamed output: bytes received per byte of output",
                 {"sandboxfs": moved}, "x", kind="size", target_sshfs=False,
                 note=f"written as {mib} pieces of 1 MiB 20 ms apart and read by a cat "
                      f"that follows it; the whole run took {statistics.median(took):.2f} s "
                      f"(median); the output kept whole (the contract's answer stops at "
                      f"1 MiB)")
        # streaming on vs off, in a sandbox of its own: the bench sandbox
        # holds the earlier workloads' files by now, and every command's
        # change list walks them (measured in the metadata rows)
        (self.tmp / "clean").mkdir()
        # faults=True only serves /_admin/log (no fault is on): the text
        # each command was sent as
        clean = sbx.Server(tmp=self.tmp / "clean", faults=True)
        clean.start()
        mounts = []
        try:
            fd = os.open(self.tmp / "clean" / "sandboxes", os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o600)
            os.write(fd, f"clean {clean.url}\n".encode())
            os.close(fd)
            for name, opts in (("on", ()), ("off", ["stream=no"])):
                (self.tmp / "clean" / name).mkdir()
                mounts.append(mount.Mount(self.tmp / "clean" / name,
                                          sandboxes=self.tmp / "clean" / "sandboxes",
                                          opts=opts).start())
            s = self.measure([("sandboxfs", self.ctl_loop(mounts[0].mnt / "clean" / "ctl")),
                              ("direct", self.ctl_loop(mounts[1].mnt / "clean" / "ctl"))])
            self.row("`echo true > ctl`, streaming on vs off", s, "ms", target_sshfs=False,
                     note="in an empty sandbox; direct column: the same through a mount "
                          "with -o stream=no (the plain /execute); the ratio is what "
                          "streaming adds")
            # The mount's own share of a round trip: the same commands,
            # each against the exact text the mount sent for it (the
            # wrapper that makes the output stream and lists what changed),
            # sent by the direct client.
            sent = [c if isinstance(c, str) else c.get("command", "")
                    for c in sbx.log(clean.url, raw=True)]
            wrapped = {"on": [c for c in sent if "split -b" in c],
                       "off": [c for c in sent if c.startswith("__sfs_d=") and
                               "split -b" not in c]}
            clean_url = self.tmp / "clean-url"
            fd = os.open(clean_url, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, (clean.url + "\n").encode())
            os.close(fd)

            def direct_text(text):
                def fn(rep):
                    us, _ = self.direct("exec", self.args.commands, text, url_file=clean_url)
                    return statistics.median(us)
                return fn

            for (label, opt), m in zip((("on", "streaming on"), ("off", "-o stream=no")),
                                       mounts):
                assert wrapped[label], f"no {label} command in the server's log"
                s = self.measure([("sandboxfs", self.ctl_loop(m.mnt / "clean" / "ctl")),
                                  ("direct", direct_text(wrapped[label][-1]))])
                self.row(f"`echo true > ctl` ({opt}) vs the text it sends, sent directly",
                         s, "ms", target=("le", 1.25), target_sshfs=False,
                         note="direct: the exact command text the mount sent (the server's "
                              f"log, {len(wrapped[label][-1])} bytes), by the direct "
                              "client: the ratio is the mount's own share (the intent's "
                              "fdatasync, the FUSE requests, the hand-offs)")

            # What a command costs the sandbox: the server's CPU and that
            # of every process it ran for the command (the wrapper's
            # subshells, split, find), against `true` sent directly. On two
            # CPUs shared with the sandboxes this is what bounds many
            # commands at once (the scale rows).
            def sandbox_cpu(run):
                def fn(rep):
                    c0 = self.cpu_seconds(clean.pid)
                    run(rep)
                    return (self.cpu_seconds(clean.pid) - c0) / self.args.commands
                return fn

            for (label, opt), m in zip((("on", "streaming on"), ("off", "-o stream=no")),
                                       mounts):
                s = self.measure([
                    ("sandboxfs", sandbox_cpu(self.ctl_loop(m.mnt / "clean" / "ctl"))),
                    ("direct", sandbox_cpu(direct_text("true")))])
                self.row(f"CPU in the sandbox per `echo true > ctl` ({opt})", s, "ms",
                         target_sshfs=False,
                         note="user and system time of the server and of every process it "
                              "ran for the command (/proc: utime, stime, cutime, cstime), "
                              f"over {self.args.commands} commands; direct: `true` sent by "
                              "the direct client")
        finally:
            for m in mounts:
                m.stop()
            clean.stop()

    def git_env(self):
        """git with a fixed identity and no system or user configuration."""
        return dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.org",
                    GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.org",
                    GIT_CONFIG_NOSYSTEM="1", HOME=str(self.tmp))

    def committed_tree(self, disks, tarball, name, genv):
        """tarball unpacked as the repository disk/name on each side's own
        disk and committed there (the contract carries no modes: executables
        show as 0644, so git ignores modes)."""
        for disk in disks.values():
            repo = disk / name
            repo.mkdir()
            sh(["tar", "-xf", str(tarball), "-C", str(repo)])
            sh(["git", "init", "-q"], cwd=repo, env=genv)
            sh(["git", "config", "core.fileMode", "false"], cwd=repo, env=genv)
            sh(["git", "add", "-A"], cwd=repo, env=genv)
            sh(["git", "commit", "-q", "-m", "tree"], cwd=repo, env=genv)

    def git_clean(self, root, genv):
        """git status in root, which must find nothing changed."""
        out = sh(["git", "status", "--porcelain"], cwd=root, env=genv)
        assert out.strip() == "", out[:500]

    def git_status_variants(self, roots, repo, genv):
        """One timed `git status` of roots[name]/repo per variant name."""
        def status(name):
            def fn(rep):
                return timed_sh(["git", "status", "--porcelain"], cwd=roots[name] / repo,
                                env=genv)
            return fn
        return [(k, status(k)) for k in roots]

    def w_real(self):
        log("5. real work (untar, git status, make)")
        # a real source tree: Python's standard library as installed (without
        # its symlinks, which the contract cannot carry)
        pylib = Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        tarball = self.tmp / "src.tar"
        with tarfile.open(tarball, "w") as tf:
            tf.add(pylib, arcname="pylib", filter=lambda ti: None if any(
                p in ti.name.split("/") for p in ("__pycache__", "site-packages",
                                                  "dist-packages", "test")) or
                "config-" in ti.name or ti.issym() or ti.islnk() else ti)
        with tarfile.open(tarball) as tf:
            members = tf.getmembers()
        nfiles = sum(1 for m in members if m.isfile())
        tar_mib = tarball.stat().st_size / MiB
        roots = {"sandboxfs": self.mws, "local disk": self.local}
        if self.ssh:
            roots["sshfs"] = self.smnt

        def untar(name):
            def fn(rep):
                d = roots[name] / f"untar{rep}"
                os.mkdir(d)
                return timed_sh(["tar", "-xf", str(tarball), "-C", str(d)])
            return fn

        self.hwm_reset()
        s = self.measure([(k, untar(k)) for k in roots])
        self.row(f"untar a source tree ({nfiles} files, {tar_mib:.0f} MiB)", s, "s",
                 rss=self.hwm_mib(), note="local disk: the same tar on the local disk")

        # git status in a real repository: the tree, committed on each side's disk
        disks = {"sandboxfs": self.ws, "local disk": self.local}
        if self.ssh:
            disks["sshfs"] = self.sroot
        genv = self.git_env()
        self.committed_tree(disks, tarball, "repo", genv)
        self.ctl()
        first = {}
        for k, root in roots.items():
            t = now()
            out = sh(["git", "status", "--porcelain"], cwd=root / "repo", env=genv)
            first[k] = [now() - t]
            assert out.strip() == "", out[:500]
        self.row("git status, first (index from another disk)", first, "s",
                 note="one sample each: git re-reads every file whose stat data changed")

        self.hwm_reset()
        s = self.measure(self.git_status_variants(roots, "repo", genv))
        self.row(f"git status ({nfiles} files)", s, "s", rss=self.hwm_mib())

        # make of a small C project: the project's own backend/ and journal/
        for k, disk in disks.items():
            p = disk / "proj"
            p.mkdir()
            for sub in ("backend", "journal"):
                for f in (REPO / sub).iterdir():
                    if f.suffix in (".c", ".h"):
                        shutil.copy(f, p / f.name)
            (p / "common").mkdir()  # the headers they include as "common/..."
            for f in (REPO / "common").glob("*.h"):
                shutil.copy(f, p / "common" / f.name)
            (p / "Makefile").write_text(MAKEFILE)
        nsrc = len(list((self.ws / "proj").glob("*.c")))
        self.ctl()

        def make(name):
            def fn(rep):
                p = roots[name] / "proj"
                sh(["make", "-s", "clean"], cwd=p)
                return timed_sh(["make", "-s", f"-j{os.cpu_count() or 1}"], cwd=p)
            return fn

        self.hwm_reset()
        s = self.measure([(k, make(k)) for k in roots])
        self.row(f"make -j{os.cpu_count()} of a small C project ({nsrc} files)", s, "s",
                 rss=self.hwm_mib())

    def status_short_cache(self, nfiles, genv):
        """git status over the header tree again, against sshfs keeping what
        it lists and stats 1 s (-o dcache_timeout=1), as long as sandboxfs
        keeps a listing (-o listing_ttl, 1000 ms): the row above compares a
        1 s cache with sshfs's 20 s one."""
        short = Sshfs(self.tmp / "ssh1", self.sroot, self.tmp / "sshmnt1",
                      opts=["dcache_timeout=1"])
        short.start()
        try:
            self.git_clean(short.mnt / "increpo", genv)
            roots = {"sandboxfs": self.mws, "sshfs": short.mnt}
            s = self.measure(self.git_status_variants(roots, "increpo", genv))
            self.row(f"git status ({nfiles} files), sshfs keeping names and attributes 1 s",
                     s, "s", note="sshfs -o dcache_timeout=1 (its default is 20 s): "
                     "the 1 s sandboxfs keeps a listing (-o listing_ttl)")
        finally:
            short.stop()

    def w_tools(self):
        log("6. git and rsync over a header tree (git status, git clone, rsync -a)")
        # /usr/include of this machine (about 8,000 files): its regular files,
        # as a tarball; its few symlinks are left out so the three sides hold
        # the same tree
        inc = Path("/usr/include")
        tarball = self.tmp / "include.tar"
        with tarfile.open(tarball, "w") as tf:
            tf.add(inc, arcname="include",
                   filter=lambda ti: None if ti.issym() or ti.islnk() else ti)
        with tarfile.open(tarball) as tf:
            names = sorted(m.name for m in tf.getmembers() if m.isfile())
        nfiles = len(names)
        roots = {"sandboxfs": self.mws, "local disk": self.local}
        disks = {"sandboxfs": self.ws, "local disk": self.local}
        if self.ssh:
            roots["sshfs"] = self.smnt
            disks["sshfs"] = self.sroot
        genv = self.git_env()

        # git status in the whole tree, committed on each side's own disk
        self.committed_tree(disks, tarball, "increpo", genv)
        self.ctl()
        for root in roots.values():  # the index was written on another disk
            self.git_clean(root / "increpo", genv)

        self.hwm_reset()
        s = self.measure(self.git_status_variants(roots, "increpo", genv))
        self.row(f"git status ({nfiles} files of /usr/include)", s, "s", rss=self.hwm_mib())
        if self.ssh:
            self.status_short_cache(nfiles, genv)

        # a 2,000-file repository on the local disk, cloned into each side
        src = self.tmp / "src2000"
        src.mkdir()
        with tarfile.open(tarball) as tf:
            keep = set(names[:2000])
            tf.extractall(src, members=[m for m in tf.getmembers()
                                        if m.name in keep or m.isdir()])
        sh(["git", "init", "-q"], cwd=src, env=genv)
        sh(["git", "add", "-A"], cwd=src, env=genv)
        sh(["git", "commit", "-q", "-m", "tree"], cwd=src, env=genv)
        nsrc = int(sh(["git", "ls-files", "-z"], cwd=src, env=genv).count("\0"))

        def clone(name):
            def fn(rep):
                return timed_sh(["git", "clone", "-q", "--no-hardlinks", f"file://{src}",
                                 str(roots[name] / f"clone{rep}")], env=genv)
            return fn

        self.hwm_reset()
        s = self.measure([(k, clone(k)) for k in roots])
        self.row(f"git clone of a {nsrc}-file repository", s, "s", rss=self.hwm_mib())

        def rsync(name):
            def fn(rep):
                return timed_sh(["rsync", "-a", f"{src}/include/",
                                 str(roots[name] / f"rsync{rep}")])
            return fn

        self.hwm_reset()
        s = self.measure([(k, rsync(k)) for k in roots])
        self.row(f"rsync -a of the same tree ({nsrc} files)", s, "s", rss=self.hwm_mib(),
                 note="into an empty directory each time")


MAKEFILE = """\
SRCS := $(sort $(wildcard *.c))
OBJS := $(SRCS:.c=.o)
CFLAGS := -O1 -I. -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DSANDBOXFS_VERSION=\\"bench\\" \
  $(shell pkg-config --cflags libcurl libcjson)
libproj.a: $(OBJS)
\tar rcs $@ $^
clean:
\trm -f $(OBJS) libproj.a
"""


# --- the report ------------------------------------------------------------------

def fmt(v, unit):
    if v is None:
        return "—"
    if unit == "x":
        return f"{v:.3f}"
    if unit == "MiB":
        return f"{v / 2**20:,.0f} MiB"
    if unit == "MB/s":
        return f"{v / 1e6:,.0f} MB/s"
    if unit == "ms" and v < 1e-3:
        return f"{v * 1e6:,.0f} µs"
    if unit == "ms":
        return f"{v * 1e3:,.2f} ms" if v < 0.1 else f"{v * 1e3:,.0f} ms"
    return f"{v:,.3f} s" if v < 10 else f"{v:,.1f} s"


def ratio_vs(row, other):
    """sandboxfs relative to another variant: time ratio (lower is better)
    for times, rate ratio (higher is better) for rates."""
    a, b = row["med"].get("sandboxfs"), row["med"].get(other)
    if a is None or b is None or b == 0:
        return None
    return a / b


def verdicts(row):
    out = []
    t = row["target"]
    a = row["med"].get("sandboxfs")
    if t:
        op, x = t
        if op == "le":
            r = ratio_vs(row, "direct")
            out.append(("direct", f"≤ {x}×", r is not None and r <= x))
        elif op == "ge":
            r = ratio_vs(row, "direct")
            out.append(("direct", f"≥ {x}×", r is not None and r >= x))
        elif op == "abs_ge":
            out.append(("abs", f"≥ {x / 1e9:g} GB/s", a is not None and a >= x))
    if row["target_sshfs"] and "sshfs" in row["med"]:
        r = ratio_vs(row, "sshfs")
        faster = r is not None and (r > 1 if row["kind"] == "rate" else r < 1)
        out.append(("sshfs", "faster", faster))
    return out


def report(b, machine, elapsed):
    lines = ["## Benchmarks", "",
             f"Run: `tests/bench/run BUILD_DIR` ({b.reps} repetitions per figure, "
             f"medians; variants interleaved ABC/CBA). Machine: {machine}. "
             f"Total run time {elapsed:.0f} s.", "",
             "Ratios: for times, sandboxfs time ÷ other time (lower is better); "
             "for throughputs (MB/s), sandboxfs ÷ other (higher is better).", "",
             "| workload | sandboxfs vs direct | target | met | sandboxfs vs sshfs | met | "
             "sandboxfs | direct | sshfs | local disk | peak RSS |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in b.rows:
        v = {k: ok for k, _, ok in [(a, t, o) for a, t, o in verdicts(row)]}
        targets = {k: t for k, t, _ in verdicts(row)}
        rd = ratio_vs(row, "direct")
        rs = ratio_vs(row, "sshfs")
        tgt = targets.get("direct") or targets.get("abs") or ""
        met_d = v.get("direct", v.get("abs"))
        cells = [
            row["name"],
            f"{rd:.2f}×" if rd is not None else "—",
            tgt,
            "" if met_d is None else ("**met**" if met_d else "**missed**"),
            f"{rs:.2f}×" if rs is not None else "—",
            "" if "sshfs" not in v else ("**met**" if v["sshfs"] else "**missed**"),
        ] + [fmt(row["med"].get(k), row["unit"]) for k in ("sandboxfs", "direct", "sshfs",
                                                            "local disk")] + \
            [f"{row['rss']:.0f} MiB" if row["rss"] else "—"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for row in b.rows:
        if row["note"]:
            lines.append(f"- {row['name']}: {row['note']}")
    for n in b.notes:
        lines.append(f"- {n}")
    return "\n".join(lines) + "\n"


def machine_line():
    mem = ""
    try:
        mem = subprocess.run(["free", "-h"], capture_output=True, text=True).stdout.split("\n")[1].split()[1]
    except Exception:
        pass
    cpu = ""
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs (nproc) {cpu}, {mem} RAM (free -h), "
            f"kernel {platform.release()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", action="append",
                    choices=["roundtrip", "large", "huge", "small", "metadata", "real",
                             "tools", "stream", "scale", "memory"])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, 3 repetitions (a smoke run, not for the table)")
    ap.add_argument("--no-sshfs", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--tmp", default=None, help="scratch parent (default $TMPDIR)")
    ap.add_argument("--out", default=None, help="also write the table (markdown) here")
    ap.add_argument("--json", default=None, help="write every sample here")
    ap.add_argument("--eatmydata", action="store_true",
                    help="diagnosis: run sandboxfs with fsync/fdatasync as no-ops")
    ap.add_argument("-o", dest="opt", action="append", help="extra sandboxfs -o option")
    ap.add_argument("--scale-sandboxes", type=int, default=None,
                    help="sandboxes of the scale and memory workloads (1000)")
    ap.add_argument("--scale-commands", type=int, default=None,
                    help="commands started at once in the scale workload (500)")
    ap.add_argument("--scale-seconds", type=int, default=5,
                    help="how long each of them runs (5)")
    ap.add_argument("--stream-mib", type=int, default=None,
                    help="output of the stream workload, MiB (100)")
    ap.add_argument("--scale-daemon-nofile", type=int, default=None,
                    help="the mount's soft limit of open files in the scale workload, "
                         "set once it is up (default: what it inherits; the workload "
                         "raises its own to the hard limit, at most 65536, for the local "
                         "orchestrator's three per sandbox)")
    ap.add_argument("--memory-entries", type=int, default=None,
                    help="workspace entries the memory workload finds (200000)")
    ap.add_argument("--huge-mib", type=int, default=None,
                    help="size of the file larger than the cache, MiB (4096)")
    ap.add_argument("--huge-reps", type=int, default=1,
                    help="repetitions of the huge workload (1: it moves 16 GiB each)")
    args = ap.parse_args()
    args.commands, args.large_mib, args.files = 200, 256, 1000
    args.dir_entries, args.tree_files = 10000, 20000
    sizes = dict(scale_sandboxes=1000, scale_commands=500, memory_entries=200000,
                 stream_mib=100, huge_mib=4096)
    if args.quick:
        sizes = dict(scale_sandboxes=100, scale_commands=50, memory_entries=20000,
                     stream_mib=8, huge_mib=64)
    for key, v in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, v)
    if args.quick:
        args.reps = min(args.reps, 3)
        args.commands, args.large_mib, args.files = 50, 32, 200
        args.dir_entries, args.tree_files = 2000, 2000
    b = Bench(args)
    t0 = time.monotonic()
    try:
        b.start()
        for name in ("roundtrip", "large", "huge", "small", "metadata", "real", "tools",
                     "stream", "scale", "memory"):
            if not args.only or name in args.only:
                try:
                    getattr(b, "w_" + name)()
                except Exception as e:
                    log(f"bench: workload {name} failed: {e}")
                    b.notes.append(f"workload {name} FAILED: {str(e)[:300]}")
    finally:
        b.stop()
    text = report(b, machine_line(), time.monotonic() - t0)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{k: r[k] for k in ("name", "unit", "kind", "samples", "rss", "note")} for r in b.rows],
            indent=1))


if __name__ == "__main__":
    main()
