"""mount — start and stop a sandboxfs mount for tests (stdlib only).

Import it from a conftest.py with::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    import mount

``Mount(tmp, ...)`` runs ``build/fuse/sandboxfs -f`` on ``tmp/mnt`` with its
own state directory ``tmp/state`` (or ``state=``), either ``local=True``
(the embedded default, ``--local``) or against an orchestrator
(``server=`` an ``sbx.Server(orchestrator=True)``: its URL and token file
are passed as -o orchestrator= and -o token_file=), plus ``sandboxes=`` (a
path) and any ``opts`` ("-o" values) or ``args``. ``start()`` polls until
the mount is up while checking the daemon still lives; ``stop()`` unmounts
with ``fusermount3 -u`` (``-u -z`` as the last resort) and waits for the
daemon; ``kill9()`` kills it and waits for auto_unmount. Use it as a
context manager so it is always unmounted.

``check_log()`` fails when the daemon printed "error" or "warning"
(besides the ``allow`` patterns), and when any secret (the token, a
sandbox URL given in ``secrets``) appears in what it printed.

The daemon runs in its own session, so signals sent to a test's process
group never reach it. Every wait is bounded.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import sbx

FUSERMOUNT = shutil.which("fusermount3") or "fusermount3"


def sandboxfs_binary():
    return sbx.build_dir() / "fuse" / "sandboxfs"


def fuse_available():
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


@contextlib.contextmanager
def time_limit(seconds):
    """Bounds a mounted test: skips it without FUSE, raises TimeoutError in
    it after `seconds` (SIGALRM), so no test hangs without a bound."""
    if not fuse_available():
        import pytest
        pytest.skip("no /dev/fuse or fusermount3")

    def expired(signum, frame):
        raise TimeoutError(f"test exceeded {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def is_mounted(path):
    path = os.path.realpath(str(path))
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and fields[4] == path:
                    return True
    except OSError:
        pass
    return False


class MountError(RuntimeError):
    pass


class Mount:
    def __init__(self, tmp, local=False, server=None, sandboxes=None, opts=(),
                 args=(), state=None, env=None, debug=False, mountpoint=None):
        self.tmp = Path(tmp)
        self.mnt = Path(mountpoint or self.tmp / "mnt")
        self.state = Path(state or self.tmp / "state")
        self.local = local
        self.server = server
        self.sandboxes = sandboxes
        self.opts = list(opts)
        self.args = list(args)
        self.env = env
        self.debug = debug
        self.proc = None
        self.logfile = self.tmp / f"sandboxfs-{id(self)}.log"
        self._logf = None
        self.secrets = []
        if server is not None and server.token:
            self.secrets.append(server.token)

    def __repr__(self):
        return f"<mount.Mount {self.mnt}>"

    def command(self):
        cmd = [str(sandboxfs_binary()), "-f"]
        if self.debug:
            cmd.append("-d")
        o = [f"state={self.state}"]
        if self.server is not None:
            o.append(f"orchestrator={self.server.url}")
            if self.server.token_file:
                o.append(f"token_file={self.server.token_file}")
        if self.sandboxes:
            o.append(f"sandboxes={self.sandboxes}")
        o += self.opts
        cmd += ["-o", ",".join(o)]
        if self.local:
            cmd.append("--local")
        cmd += self.args
        cmd.append(str(self.mnt))
        return cmd

    def run_daemon(self, timeout=20):
        """Runs the daemon to completion (for failures before the mount):
        returns (exit code, output)."""
        self.mnt.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(self.env or {})
        p = subprocess.run(self.command(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env, timeout=timeout, start_new_session=True)
        if is_mounted(self.mnt):
            self.stop()
            raise MountError("the daemon mounted although it should not have")
        return p.returncode, p.stdout.decode(errors="replace")

    def start(self, timeout=20):
        self.mnt.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(self.env or {})
        self._logf = open(self.logfile, "ab")
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=self._logf, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.output()
                self.proc = None
                raise MountError(f"sandboxfs exited with {self.returncode_or('?')}: "
                                 f"{out[-2000:]}")
            if is_mounted(self.mnt):
                try:
                    os.stat(self.mnt / ".sandboxfs")
                    return self
                except OSError:
                    pass
            time.sleep(0.02)
        self.stop()
        raise MountError("the mount did not appear in time: " + self.output()[-2000:])

    def returncode_or(self, default):
        return self.proc.returncode if self.proc else default

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def output(self):
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def stop(self, timeout=20):
        """Unmounts and waits for the daemon. Returns its exit code."""
        rc = None
        if is_mounted(self.mnt):
            subprocess.run([FUSERMOUNT, "-u", str(self.mnt)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        if self.proc is not None:
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    rc = self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    rc = self.proc.wait()
            self.proc = None
        if is_mounted(self.mnt):
            subprocess.run([FUSERMOUNT, "-u", "-z", str(self.mnt)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        if self._logf:
            self._logf.close()
            self._logf = None
        return rc

    def terminate(self, timeout=20):
        """SIGTERM to the daemon; waits for it and for the mount to go."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self.proc = None
        gone = sbx.wait_for(lambda: not is_mounted(self.mnt), timeout=5)
        return rc, gone

    def kill9(self, timeout=10):
        """SIGKILL to the daemon; waits for auto_unmount (lazy unmount as
        the last resort)."""
        self.proc.kill()
        self.proc.wait(timeout)
        self.proc = None
        if not sbx.wait_for(lambda: not is_mounted(self.mnt), timeout=timeout):
            subprocess.run([FUSERMOUNT, "-u", "-z", str(self.mnt)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        if self._logf:
            self._logf.close()
            self._logf = None

    def check_log(self, allow=()):
        out = self.output()
        bad = []
        for line in out.splitlines():
            if re.search(r"error|warning", line, re.I) and \
                    not any(re.search(a, line) for a in allow):
                bad.append(line)
        assert not bad, "sandboxfs printed unexpected problems:\n" + "\n".join(bad[:20])
        for s in self.secrets:
            assert s not in out, "a secret appeared in the daemon's output"

    def stats(self):
        """.sandboxfs/stats as a dict: counters as int, other values as str."""
        out = {}
        for line in read(self.path(".sandboxfs", "stats")).splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v) if v.lstrip("-").isdigit() else v
        return out

    def path(self, *parts):
        return self.mnt.joinpath(*parts)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def sh(script, shell="bash", timeout=30, cwd=None, check=False):
    """Runs a shell script with an ordinary shell; returns CompletedProcess
    with text stdout/stderr."""
    p = subprocess.run([shell, "-c", script], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout, cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError(f"{shell} -c {script!r} failed ({p.returncode}): {p.stderr}")
    return p


def read(path):
    with open(path) as f:
        return f.read()


@contextlib.contextmanager
def small_tmpfs(parent, size):
    """A tmpfs of the given size (as mount's size=, "3m") at parent/small,
    mode 0700, lazily unmounted after (a full file system under the state
    directory). Needs root."""
    d = parent / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(d)],
                   check=True, timeout=30)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], timeout=30)
