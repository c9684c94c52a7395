"""--local is private (DESIGN.md §8): the local orchestrator and its
sandboxes listen on Unix sockets in the 0700 state directory, never on a
TCP port, so another local user can neither find nor reach them; the
servers refuse a peer of another uid (SO_PEERCRED); a remount serves the
sandboxes again at the same socket paths and sends nothing to a TCP port
of an earlier run.
"""
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from faultlib import ctl, write_file
from fakeserver import FakeServer
import mount
import sbx

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def need_root():
    if os.getuid() != 0:
        pytest.skip("needs root to switch to uid 65534")


def process_tree(pid):
    """pid and all its descendants."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def socket_inodes(pids):
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def listening_tcp_ports(pids):
    """The TCP ports (v4 and v6) on which any of pids listens."""
    mine = socket_inodes(pids)
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[9]) in mine:  # 0A: LISTEN
                ports.append(int(f[1].rsplit(":", 1)[1], 16))
    return sorted(set(ports))


NOBODY_EXEC = r"""
import http.client, json, sys
ran = []
for port in map(int, sys.argv[1:]):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("POST", "/execute", body=json.dumps({"command": "id -u"}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status == 200:
            ran.append(port)
    except OSError:
        pass
print(json.dumps(ran))
"""

NOBODY_CONNECT = r"""
import json, socket, sys
out = {}
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        out[path] = "connected"
    except OSError as e:
        out[path] = e.errno
    finally:
        s.close()
print(json.dumps(out))
"""


def as_nobody(script, *args):
    p = subprocess.run(NOBODY + ["/usr/bin/python3", "-c", script, *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def unix_sockets(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "workspace"]
        for n in filenames:
            p = os.path.join(dirpath, n)
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                found.append(p)
    return sorted(found)


def test_local_listens_on_no_tcp_port_and_only_its_user_connects(tmp_path):
    need_root()
    os.chmod(tmp_path, 0o755)  # nobody may walk up to the state directory
    m = mount.Mount(tmp_path, local=True)
    with m:
        os.mkdir(m.path("priv"))
        assert ctl(m.path("priv", "ctl"), "echo hi > mine.txt")[0] == 0
        m.secrets.append((m.state / "local.token").read_text().strip())
        tree = process_tree(m.pid)
        assert len(tree) >= 2, "the local orchestrator is not a child of the daemon"
        ports = listening_tcp_ports(tree)
        # Had any port been open, this is what uid 65534 could do there.
        ran = as_nobody(NOBODY_EXEC, *ports)
        assert ports == [] and ran == [], \
            f"--local listens on TCP ports {ports}; uid 65534 ran a command through {ran}"

        socks = unix_sockets(m.state)
        assert len(socks) >= 2, socks  # the orchestrator's and the sandbox's
        for s in socks:
            assert stat.S_IMODE(os.stat(s).st_mode) == 0o600, s
            assert stat.S_IMODE(os.stat(os.path.dirname(s)).st_mode) == 0o700, s
        got = as_nobody(NOBODY_CONNECT, *socks)
        assert got == {s: errno.EACCES for s in socks}, got
        # the mounting user itself still works
        assert ctl(m.path("priv", "ctl"), "cat mine.txt")[0] == 0
        assert mount.read(m.path("priv", "stdout")) == "hi\n"
    m.check_log()


NOBODY_REQUEST = r"""
import http.client, json, socket, sys
path, method, target, body, token = sys.argv[1:6]

class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)

c = Conn("localhost", timeout=30)
h = {"Content-Type": "application/json"}
if token:
    h["Authorization"] = "Bearer " + token
c.request(method, target, body=body or None, headers=h)
r = c.getresponse()
print(json.dumps({"status": r.status, "body": r.read().decode()}))
"""


def nobody_request(url, method, target, body="", token=""):
    """One request as uid 65534 to a server on a Unix socket."""
    return as_nobody(NOBODY_REQUEST, sbx.unix_socket_of(url), method, target, body, token)


class NobodyServer:
    """sandbox-server run as uid 65534 on a Unix socket in a directory of
    its own, so that the test (root) can reach the socket past its modes."""

    def __init__(self, top, name, *args):
        self.top = top
        self.url_file = top / f"{name}.url"
        self.proc = subprocess.Popen(
            NOBODY + [str(sbx.server_binary()), "--url-file", str(self.url_file), *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if not sbx.wait_for(lambda: self.url_file.exists() or self.proc.poll() is not None):
            self.stop()
            raise AssertionError("sandbox-server did not start in time")
        if self.proc.poll() is not None:
            raise AssertionError("sandbox-server exited: " + self.proc.stdout.read().decode())
        self.url = self.url_file.read_text().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read().decode()


def nobody_dir():
    top = tempfile.mkdtemp(prefix="sbxfs-peer-")
    os.chown(top, 65534, 65534)
    os.chmod(top, 0o700)
    return top


def test_unix_servers_refuse_a_peer_of_another_uid():
    need_root()
    top = Path(nobody_dir())
    servers = []
    try:
        token = "peer-check-token-0123456789"
        (top / "token").write_text(token + "\n")
        os.chown(top / "token", 65534, 65534)
        orch = NobodyServer(top, "orch", "--orchestrator", "--root", str(top / "root"),
                            "--unix", str(top / "run" / "orch"),
                            "--token-file", str(top / "token"))
        servers.append(orch)
        assert orch.url.startswith("http+unix://")
        # Its own user (65534) creates a sandbox and runs a command in it.
        r = nobody_request(orch.url, "POST", "/v1/sandbox",
                           json.dumps({"pool": "default", "id": "box"}), token)
        assert r["status"] == 201, r
        box = json.loads(r["body"])["url"]
        assert box.startswith("http+unix://")
        r = nobody_request(box, "POST", "/execute", json.dumps({"command": "echo mine"}))
        assert r["status"] == 200 and json.loads(r["body"])["stdout"] == "mine\n", r

        # Root gets past the modes of the sockets, never past SO_PEERCRED.
        marker = top / "root" / "box" / "workspace" / "root-was-here"
        c = sbx.Client(orch.url, token=token)
        for resp in (c.healthz(), c.sandboxes(), c.create(pool="default", id="mine"),
                     c.delete_sandbox("box")):
            assert resp.status == 403, resp
        s = sbx.Client(box)
        for resp in (s.execute(f"touch {marker}"), s.put("x.txt", b"x"), s.get(""),
                     s.healthz()):
            assert resp.status == 403, resp
        assert not marker.exists()
        r = nobody_request(box, "GET", "/files/")
        assert r["status"] == 200 and json.loads(r["body"])["entries"] == [], r
        r = nobody_request(orch.url, "GET", "/v1/sandbox", "", token)
        assert [b["id"] for b in json.loads(r["body"])["sandboxes"]] == ["box"], r

        # The single-sandbox mode too.
        one = NobodyServer(top, "one", "--workspace", str(top / "ws"),
                           "--unix", str(top / "one.sock"))
        servers.append(one)
        assert sbx.Client(one.url).execute(f"touch {marker}").status == 403
        assert not marker.exists()
        r = nobody_request(one.url, "POST", "/execute", json.dumps({"command": "id -u"}))
        assert r["status"] == 200 and json.loads(r["body"])["stdout"] == "65534\n", r
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(top, ignore_errors=True)


def local_pid(m):
    return int((m.state / "local.pid").read_text())


def test_local_remount_serves_the_same_sockets_and_works(tmp_path):
    m = mount.Mount(tmp_path, local=True)
    orch = sbx.LocalOrchestrator(m.state)
    with m:
        os.mkdir(m.path("s1"))
        assert write_file(m.path("s1", "workspace", "a.txt"), b"one\n") == (0, 0)
        assert ctl(m.path("s1", "ctl"), "echo two > b.txt")[0] == 0
        m.secrets.append(orch.token)
        url = sbx.sandbox_url(orch, "s1")
        m.secrets.append(url)
        assert sbx.unix_socket_of(url).startswith(str(m.state / "run") + "/")
        assert sbx.get(url, "a.txt").body == b"one\n"  # on the server
        pid = local_pid(m)
    m.check_log()

    m2 = mount.Mount(tmp_path, local=True)
    with m2:
        assert local_pid(m2) != pid  # a new orchestrator ...
        m2.secrets.append(orch.token)
        same = sbx.sandbox_url(orch, "s1") == url
        assert same  # ... serves it at the same socket (URLs are not shown)
        assert listening_tcp_ports(process_tree(m2.pid)) == []
        # commands and files, both ways
        assert ctl(m2.path("s1", "ctl"), "cat a.txt b.txt")[0] == 0
        assert mount.read(m2.path("s1", "stdout")) == "one\ntwo\n"
        assert write_file(m2.path("s1", "workspace", "c.txt"), b"three\n") == (0, 0)
        assert sbx.get(url, "c.txt").body == b"three\n"
        assert sbx.put(url, "d.txt", b"four\n").status == 204
        assert ctl(m2.path("s1", "ctl"), "true")[0] == 0  # revalidates the cache
        assert mount.read(m2.path("s1", "workspace", "d.txt")) == "four\n"
        assert mount.read(m2.path("s1", "runs", "1", "stdout")) == ""
        assert mount.read(m2.path("s1", "last")) == "3\n"
    m2.check_log()


def test_local_remount_after_a_tcp_run_sends_nothing_to_its_old_port(tmp_path):
    """A state directory of a version whose --local used TCP: its journal
    holds http://127.0.0.1:PORT URLs. The remount must not send a byte
    there (another user may own that port now); the sandboxes come back on
    sockets and pending work goes to them."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (tmp_path / "old").mkdir()
    old = sbx.Server(orchestrator=True, faults=True, root=state / "local", tmp=tmp_path / "old")
    old.start()
    try:
        # listings kept long enough that the upload is the request to fail
        m = mount.Mount(tmp_path, server=old, state=state, opts=["listing_ttl=60000"])
        with m:
            os.mkdir(m.path("s1"))
            url = sbx.sandbox_url(old, "s1")
            m.secrets.append(url)
            assert ctl(m.path("s1", "ctl"), "echo one > one.txt")[0] == 0
            assert os.listdir(m.path("s1", "workspace")) == ["one.txt"]
            sbx.set_faults(url, error_rate=1.0, routes="files")
            assert write_file(m.path("s1", "workspace", "pending.txt"), b"p\n")[1] == errno.EIO
        m.check_log(allow=[r"upload failed"])
    finally:
        old.cleanup()
    old_port = int(url.rsplit(":", 1)[1].strip("/"))

    # A stranger now listens on that port and would take anything sent.
    stranger = FakeServer()
    stranger.route("POST", "/", 200, {"exitCode": 0, "stdout": "stolen\n", "stderr": "",
                                      "durationMillis": 1, "truncated": False})
    stranger.route("GET", "/", 200, {"entries": [], "status": "ok"})
    stranger.route("PUT", "/", 204)
    stranger.route("DELETE", "/", 204)
    stranger.start(old_port)
    try:
        m2 = mount.Mount(tmp_path, local=True, state=state)
        orch = sbx.LocalOrchestrator(state)
        with m2:
            m2.secrets += [url, orch.token]
            assert sorted(os.listdir(m2.path("s1", "workspace"))) == ["one.txt", "pending.txt"]
            new = sbx.sandbox_url(orch, "s1")
            m2.secrets.append(new)
            assert new.startswith("http+unix://")
            # the pending upload reaches the sandbox, on its socket
            assert sbx.wait_for(lambda: sbx.get(new, "pending.txt").status == 200, timeout=30)
            assert sbx.get(new, "pending.txt").body == b"p\n"
            assert ctl(m2.path("s1", "ctl"), "cat one.txt")[0] == 0
            assert mount.read(m2.path("s1", "stdout")) == "one\n"
        assert stranger.requests == [], stranger.requests
        m2.check_log(allow=[r"upload failed"])
    finally:
        stranger.stop()


def test_a_sandbox_and_an_orchestrator_on_unix_sockets_outside_local(tmp_path):
    """The Unix URL form is not --local's alone: attach takes it, and so
    does SOURCE (fstab's first field) for an orchestrator."""
    (tmp_path / "one").mkdir()
    (tmp_path / "orch").mkdir()
    one = sbx.Server(unix=True, faults=True, tmp=tmp_path / "one").start()
    orch = sbx.Server(orchestrator=True, unix=True, faults=True, tmp=tmp_path / "orch").start()
    try:
        assert one.url.startswith("http+unix://") and orch.url.startswith("http+unix://")
        m = mount.Mount(tmp_path, args=[orch.url], opts=[f"token_file={orch.token_file}"])
        m.secrets += [one.url, orch.url, orch.token]
        with m:
            assert ctl(m.path(".sandboxfs", "ctl"), f"attach ext {one.url}")[0] == 0
            assert ctl(m.path("ext", "ctl"), "echo attached")[0] == 0
            assert mount.read(m.path("ext", "stdout")) == "attached\n"
            assert write_file(m.path("ext", "workspace", "w.txt"), b"w") == (0, 0)
            assert (one.workspace / "w.txt").read_bytes() == b"w"
            assert sbx.log(one.url) == ["echo attached"]
            os.mkdir(m.path("made"))  # created by the orchestrator named by SOURCE
            assert ctl(m.path("made", "ctl"), "echo made")[0] == 0
            made = sbx.sandbox_url(orch, "made")
            assert made.startswith("http+unix://")
            assert sbx.log(made) == ["echo made"]
        m.check_log()
    finally:
        one.cleanup()
        orch.cleanup()


def test_a_state_directory_too_long_for_sockets_uses_a_short_private_one(tmp_path):
    """STATE/run/XXXXXXXX must fit in sun_path (107 bytes). A longer STATE
    (here 150 bytes) puts its sockets in $XDG_RUNTIME_DIR/sandboxfs-<random>,
    private and recorded, kept across remounts; a name someone else took
    meanwhile is never used."""
    need_root()
    os.chmod(tmp_path, 0o755)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    base = str(tmp_path / "s")
    state = Path(base + "/" + "x" * (150 - len(base) - 1))
    assert len(str(state)) == 150
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    m = mount.Mount(tmp_path, local=True, state=state, env=env)
    orch = sbx.LocalOrchestrator(state)
    with m:
        os.mkdir(m.path("deep"))
        assert ctl(m.path("deep", "ctl"), "echo deep > d.txt")[0] == 0
        m.secrets += [orch.token, orch.url]
        url = sbx.sandbox_url(orch, "deep")
        m.secrets.append(url)
        run = Path(sbx.unix_socket_of(url)).parent
        assert run.parent == runtime and run.name.startswith("sandboxfs-"), run
        assert (state / "local.rundir").read_text().strip() == str(run)
        assert stat.S_IMODE(os.stat(state / "local.rundir").st_mode) == 0o600
        assert stat.S_IMODE(os.lstat(run).st_mode) == 0o700 and not run.is_symlink()
        assert not (state / "run").exists()
        assert listening_tcp_ports(process_tree(m.pid)) == []
        os.chmod(runtime, 0o755)  # let nobody walk up to the sockets' directory
        socks = unix_sockets(run)
        assert len(socks) == 2, socks
        assert as_nobody(NOBODY_CONNECT, *socks) == {s: errno.EACCES for s in socks}
        os.chmod(runtime, 0o700)  # else it is no private runtime directory
    m.check_log()

    m = mount.Mount(tmp_path, local=True, state=state, env=env)
    with m:
        m.secrets += [orch.token, orch.url, url]
        same = sbx.sandbox_url(orch, "deep") == url
        assert same  # the same socket again (URLs are secrets: not shown)
        assert ctl(m.path("deep", "ctl"), "cat d.txt")[0] == 0
        assert mount.read(m.path("deep", "stdout")) == "deep\n"
    m.check_log()

    # The orchestrator took its empty directory along; someone else takes
    # the recorded name while nothing is mounted.
    assert not run.exists()
    run.mkdir(mode=0o777)
    os.chown(run, 65534, 65534)
    m = mount.Mount(tmp_path, local=True, state=state, env=env)
    with m:
        new = sbx.sandbox_url(orch, "deep")
        m.secrets += [orch.token, orch.url, url, new]
        assert Path(sbx.unix_socket_of(new)).parent.parent == runtime
        assert Path(sbx.unix_socket_of(new)).parent != run
        assert os.listdir(run) == []  # nothing was put in the stranger's directory
        assert ctl(m.path("deep", "ctl"), "cat d.txt")[0] == 0
        assert mount.read(m.path("deep", "stdout")) == "deep\n"
    m.check_log()


def run_server(*args):
    return subprocess.run([str(sbx.server_binary()), *map(str, args)], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_unix_mode_sockets_private_stale_replaced_live_kept(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    os.chmod(run, 0o755)
    (tmp_path / "srv").mkdir()
    p = run_server("--unix", run / "orch", "--port", "1")
    assert p.returncode == 2 and "--unix excludes" in p.stderr, p.stderr
    # a socket file left by a server that died is replaced
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(run / "orch"))
    stale.close()
    srv = sbx.Server(orchestrator=True, unix=True, tmp=tmp_path / "srv")
    cmd = srv.command()
    cmd[cmd.index("--unix") + 1] = str(run / "orch")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert sbx.wait_for(lambda: (tmp_path / "srv" / "url").exists())
        url = (tmp_path / "srv" / "url").read_text().strip()
        assert sbx.unix_socket_of(url) == str(run / "orch")
        assert stat.S_IMODE(os.stat(run).st_mode) == 0o700  # made private
        assert stat.S_IMODE(os.stat(run / "orch").st_mode) == 0o600
        c = sbx.Client(url, token=srv.token)
        r = c.create(pool="default", id="b1")
        assert r.status == 201, r
        box = sbx.unix_socket_of(r.json()["url"])
        assert os.path.dirname(box) == str(run)
        assert stat.S_IMODE(os.stat(box).st_mode) == 0o600
        # a live server's socket is never taken over
        p = run_server("--unix", run / "orch", "--workspace", tmp_path / "ws")
        assert p.returncode == 1 and "another server is listening" in p.stderr, p.stderr
        assert c.healthz().status == 200
        # nor is a file that is not a socket
        (run / "plain").write_text("x")
        p = run_server("--unix", run / "plain", "--workspace", tmp_path / "ws")
        assert p.returncode == 1 and "not a socket" in p.stderr, p.stderr
        assert (run / "plain").read_text() == "x"
    finally:
        proc.terminate()
        proc.wait(15)
    # a clean stop removes the sockets
    assert sorted(os.listdir(run)) == ["plain"]
