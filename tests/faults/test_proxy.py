"""Proxies (DESIGN.md §1: the sandbox URL and the token are capabilities):
the daemon never sends a request to a proxy the user did not name. The
http_proxy, https_proxy, all_proxy (and no_proxy) variables of its
environment are ignored; -o proxy=URL sends every request, to the
orchestrator and to the sandboxes, through that proxy and no other.
"""
import http.client
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from faultlib import ctl, sandbox_url, write_file
import mount
import sbx


def dead_port():
    """A 127.0.0.1 port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_env(url):
    """Every proxy variable libcurl reads, pointing at url; no exceptions."""
    env = {}
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        env[name] = env[name.upper()] = url
    env["no_proxy"] = env["NO_PROXY"] = ""
    return env


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        target = urlsplit(self.path)  # absolute-form: http://host:port/path
        with self.server.lock:
            self.server.seen.append((self.command, self.path,
                                     self.headers.get("Authorization")))
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("proxy-connection", "connection", "host")}
        c = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        path = target.path + (f"?{target.query}" if target.query else "")
        c.request(self.command, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        c.close()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                 "keep-alive"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _forward


class RecordingProxy:
    """A forward HTTP proxy on 127.0.0.1 that records every request
    (method, absolute URL, Authorization header) and passes it on."""

    def __init__(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyHandler)
        self.httpd.daemon_threads = True
        self.httpd.seen = []
        self.httpd.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def seen(self):
        with self.httpd.lock:
            return list(self.httpd.seen)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def use_sandbox(m, orch, sid):
    """Create, run a command, write and read a file: every kind of request."""
    os.mkdir(m.path(sid))
    d = m.path(sid)
    assert ctl(d / "ctl", "echo hi")[0] == 0
    assert mount.read(d / "stdout") == "hi\n"
    ws = d / "workspace"
    assert write_file(ws / "f.txt", b"data") == (0, 0)
    url = sandbox_url(orch, sid)
    m.secrets.append(url)
    assert sbx.get(url, "f.txt").body == b"data"
    assert sbx.put(url, "g.txt", b"from the server").status == 204
    with open(ws / "g.txt", "rb") as f:
        assert f.read() == b"from the server"
    assert sorted(os.listdir(ws)) == ["f.txt", "g.txt"]


def test_proxy_environment_is_ignored(mounts, orch):
    """Every proxy variable points at a dead port: the mount still works,
    so nothing went to a proxy."""
    dead = f"http://127.0.0.1:{dead_port()}"
    m = mounts(opts=["listing_ttl=0"], env=proxy_env(dead))
    use_sandbox(m, orch, "noproxy")
    assert sbx.executed(orch, "noproxy") == ["echo hi"]


def test_named_proxy_carries_every_request(mounts, orch):
    """-o proxy=URL: the orchestrator's and the sandbox's requests all go
    through it, and the environment's proxy (a dead port) is still never
    used."""
    dead = f"http://127.0.0.1:{dead_port()}"
    with RecordingProxy() as p:
        m = mounts(opts=[f"proxy={p.url}", "listing_ttl=0"], env=proxy_env(dead))
        use_sandbox(m, orch, "viaproxy")
        url = sandbox_url(orch, "viaproxy")
        seen = p.seen()
    orch_host = urlsplit(orch.url).netloc
    sb_host = urlsplit(url).netloc
    hosts = {urlsplit(u).netloc for _, u, _ in seen}
    assert hosts <= {orch_host, sb_host}, hosts
    kinds = {(meth, urlsplit(u).netloc, urlsplit(u).path.split("/")[1]) for meth, u, _ in seen}
    assert ("POST", orch_host, "v1") in kinds, kinds        # create
    assert ("POST", sb_host, "execute") in kinds, kinds     # the command
    assert ("PUT", sb_host, "files") in kinds, kinds        # the upload
    assert ("GET", sb_host, "files") in kinds, kinds        # listing and download
    # the token went to the orchestrator only
    assert all(auth is None for _, u, auth in seen if urlsplit(u).netloc == sb_host)
    assert any(auth for _, u, auth in seen if urlsplit(u).netloc == orch_host)
    assert sbx.executed(orch, "viaproxy") == ["echo hi"]
