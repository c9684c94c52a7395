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
import socket
import stat
import subprocess
import tempfile
import shutil

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
    from pathlib import Path
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
