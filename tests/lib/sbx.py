"""sbx — shared pytest helpers for sandboxfs tests (stdlib only).

Import it from a conftest.py with::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    import sbx

What it offers:

* ``build_dir()``, ``server_binary()``: the build dir from env
  ``SANDBOXFS_BUILD`` (absolute; default ``./build`` of the checkout) and
  ``build/server/sandbox-server`` in it.
* ``Server``: starts ``sandbox-server`` on 127.0.0.1 with ``--port 0
  --port-file`` in a private temp dir and stops it by its PID (SIGTERM, then
  SIGKILL); with ``unix=True`` on a Unix socket instead (``--unix``, in the
  private dir ``tmp/run``: no TCP port; ``url`` is then ``http+unix://...``). Single-sandbox mode by default (temp workspace), or
  ``orchestrator=True`` (temp root, random token in a 0600 file, pools).
  ``faults=True`` serves ``/_admin/``; ``args=["--machinery"]`` (orchestrator)
  puts ``.pool/``, ``.sandbox-agent``, ``.pool-exec.fifo``, ``.pool-shim.log``
  in each new workspace, as a real orchestrator's agent does; ``pools=["small:2"]``
  sizes a pool (429 when full); ``fault=["lose_answer", "routes=execute"]``
  switches faults on from the start. Use as a context manager, or
  ``start_server(...)`` / ``server.stop()``. Attributes: ``url``, ``port``,
  ``pid``, ``workspace`` (single mode), ``root``, ``token``, ``token_file``
  (orchestrator mode), ``tmp`` (its private dir), ``proc``; methods
  ``client()``, ``restart()``, ``vm_hwm_kib()``, ``output()`` (what it
  printed so far).
* ``Client``: plain HTTP to one base URL (a sandbox or an orchestrator),
  ``http://HOST:PORT/BASE`` or ``http+unix://ENCODED_SOCKET_PATH/BASE``
  (the socket path percent-encoded as the host, as sandboxfs takes it).
  ``execute``, ``put``, ``put_stream``, ``get``, ``get_stream``, ``list``,
  ``delete``, ``healthz``; orchestrator calls ``create``, ``sandboxes``,
  ``sandbox``, ``delete_sandbox``, ``pools``, ``pool``; admin calls
  ``set_faults``, ``faults``, ``stats``, ``log``. Each returns a ``Response``
  (``status``, ``headers``, ``body`` bytes, ``json()``, ``text``), except the
  streaming ones. Paths are percent-encoded per segment by ``quote_path``.
  Every call has a timeout (``timeout=`` seconds, default 30).
* ``LocalOrchestrator(state)``: the orchestrator a ``sandboxfs --local``
  mount started, found through its state directory (``STATE/local.url``,
  ``STATE/local.token``); ``client()``, ``url``, ``token``, for
  ``sandbox_url`` and the shortcuts below.
* Module-level shortcuts taking a URL: ``execute(url, cmd, timeout_seconds)``,
  ``put(url, path, data)``, ``get``, ``list_dir``, ``delete``,
  ``set_faults(url, **faults)``, ``stats(url)``, ``log(url)``.

Secrets: the sandbox URL and the token are capabilities. Nothing here prints
them; do not put them in assertion messages either.
"""

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_dir():
    """The meson build directory (env SANDBOXFS_BUILD, else REPO/build)."""
    return Path(os.environ.get("SANDBOXFS_BUILD") or REPO / "build")


def server_binary():
    return build_dir() / "server" / "sandbox-server"


def quote_path(path):
    """Percent-encode each segment of a path; '/' stays a separator."""
    return "/".join(urllib.parse.quote(seg, safe="") for seg in path.split("/"))


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.body[:200]!r}>"


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket (Host: localhost)."""

    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def unix_socket_of(url):
    """The socket path of an http+unix:// URL, else None."""
    u = urllib.parse.urlsplit(url)
    if u.scheme.lower() != "http+unix":
        return None
    return urllib.parse.unquote(u.netloc)


class Client:
    """HTTP to one base URL. A new connection per request unless
    keep_alive=True (then one connection is reused and reopened when the
    server closed it)."""

    def __init__(self, url, token=None, timeout=30, keep_alive=False):
        u = urllib.parse.urlsplit(url)
        self.unix_path = unix_socket_of(url)
        if self.unix_path is None:
            self.host = u.hostname
            self.port = u.port or 80
        self.base = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.keep_alive = keep_alive
        self._conn = None

    def __repr__(self):
        return "<sbx.Client>"  # never show the URL

    def _connection(self, timeout):
        if self.keep_alive and self._conn is not None:
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
            return self._conn
        if self.unix_path is not None:
            conn = UnixHTTPConnection(self.unix_path, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        if self.keep_alive:
            self._conn = conn
        return conn

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _headers(self, headers, body_json):
        h = {}
        if body_json:
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        return {k: v for k, v in h.items() if v is not None}

    def open(self, method, path, body=None, headers=None, timeout=None, json_body=None):
        """Send a request; return the http.client response (caller reads
        and closes it) and the connection."""
        if json_body is not None:
            body = json.dumps(json_body).encode()
        conn = self._connection(timeout or self.timeout)
        try:
            conn.request(method, self.base + path, body=body,
                         headers=self._headers(headers, json_body is not None))
            return conn, conn.getresponse()
        except Exception:
            conn.close()
            if conn is self._conn:
                self._conn = None
            raise

    def request(self, method, path, body=None, headers=None, timeout=None, json_body=None):
        conn, resp = self.open(method, path, body, headers, timeout, json_body)
        try:
            data = resp.read()
            return Response(resp.status, dict(resp.getheaders()), data)
        finally:
            if not self.keep_alive:
                conn.close()

    # --- the sandbox contract ---
    def healthz(self, **kw):
        return self.request("GET", "/healthz", **kw)

    def execute(self, command, timeout_seconds=None, timeout=None, extra=None):
        body = {"command": command}
        if timeout_seconds is not None:
            body["timeoutSeconds"] = timeout_seconds
        body.update(extra or {})
        if timeout is None:
            t = timeout_seconds if timeout_seconds else 60
            timeout = t + 30
        return self.request("POST", "/execute", json_body=body, timeout=timeout)

    def put(self, path, data, **kw):
        return self.request("PUT", "/files/" + quote_path(path), body=data, **kw)

    def put_stream(self, path, chunks, length, timeout=600):
        """PUT from an iterable of bytes whose total is length."""
        return self.request("PUT", "/files/" + quote_path(path), body=chunks,
                            headers={"Content-Length": str(length)}, timeout=timeout)

    def get(self, path, **kw):
        return self.request("GET", "/files/" + quote_path(path), **kw)

    def get_stream(self, path, chunk=1 << 20, timeout=600):
        """Yield (status, chunk...) : first the status, then body chunks."""
        conn, resp = self.open("GET", "/files/" + quote_path(path), timeout=timeout)
        try:
            yield resp.status
            while True:
                b = resp.read(chunk)
                if not b:
                    break
                yield b
        finally:
            conn.close()
            if conn is self._conn:
                self._conn = None

    def list(self, path="", **kw):
        return self.request("GET", "/files/" + quote_path(path), **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", "/files/" + quote_path(path), **kw)

    # --- the orchestrator API ---
    def create(self, body=None, **fields):
        body = dict(body or {}, **fields)
        return self.request("POST", "/v1/sandbox", json_body=body)

    def sandboxes(self):
        return self.request("GET", "/v1/sandbox")

    def sandbox(self, sid):
        return self.request("GET", "/v1/sandbox/" + quote_path(sid))

    def delete_sandbox(self, sid):
        return self.request("DELETE", "/v1/sandbox/" + quote_path(sid))

    def pools(self):
        return self.request("GET", "/v1/sandbox-pool")

    def pool(self, pid):
        return self.request("GET", "/v1/sandbox-pool/" + quote_path(pid))

    # --- /_admin/ (servers started with --faults) ---
    def set_faults(self, **faults):
        """Replace the fault set (absent fields: off). Returns the set."""
        r = self.request("POST", "/_admin/faults", json_body=faults)
        assert r.status == 200, r
        return r.json()

    def faults(self):
        return self.request("GET", "/_admin/faults").json()

    def stats(self):
        return self.request("GET", "/_admin/stats").json()

    def log(self, raw=False):
        """Commands started by /execute, oldest first: the user's text of
        each (see user_command), or with raw what the server received."""
        cmds = self.request("GET", "/_admin/log").json()["commands"]
        if raw:
            return cmds
        return [user_command(c) if isinstance(c, str) else
                dict(c, command=user_command(c.get("command"))) for c in cmds]


def user_command(sent):
    """The user's own text of a command sandboxfs sent: the contract has no
    env, cwd, stdin or streamed output, so a command with any of them is
    sent wrapped in sh (mount/runenv.c, mount/stream.c) whose first line
    starting with `eval '` carries the user's text, single-quoted."""
    if not isinstance(sent, str):
        return sent
    wrapped = sent.startswith(("__sfs_d=", "exec 0<", "cd -- ", "export ", "eval '"))
    at = 0 if sent.startswith("eval '") else sent.find("\neval '") + 1
    if not wrapped or (at == 0 and not sent.startswith("eval '")):
        return sent
    i = at + len("eval '")
    out = []
    while i < len(sent):
        j = sent.find("'", i)
        if j < 0:
            return sent  # not ours after all
        out.append(sent[i:j])
        if sent.startswith("'\\''", j):
            out.append("'")
            i = j + 4
        else:
            return "".join(out)
    return sent


class Server:
    """A sandbox-server process on 127.0.0.1 with an ephemeral port."""

    def __init__(self, orchestrator=False, faults=False, fault=(), workspace=None,
                 root=None, token=True, pools=(), shell=None, env=None, args=(),
                 port=0, tmp=None, unix=False):
        self.orchestrator = orchestrator
        self.unix = unix
        self.faults = faults
        self.fault = list(fault)
        self.own_tmp = tmp is None
        self.tmp = Path(tmp or tempfile.mkdtemp(prefix="sbx-server-"))
        self.workspace = None if orchestrator else Path(workspace or self.tmp / "workspace")
        self.root = Path(root or self.tmp / "root") if orchestrator else None
        self.token = None
        self.token_file = None
        if orchestrator and token:
            self.token = token if isinstance(token, str) else secrets.token_hex(16)
            self.token_file = self.tmp / "token"
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.token + "\n")
        self.pools = list(pools)
        self.shell = shell
        self.env = env
        self.args = list(args)
        self.want_port = port
        self.port = None
        self.url = None
        self.proc = None
        self._log = None

    def __repr__(self):
        return f"<sbx.Server pid={self.pid}>"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def unix_path(self):
        """The socket the server listens on (unix=True), else None."""
        if not self.unix:
            return None
        return self.tmp / "run" / ("orch" if self.orchestrator else "sandbox")

    def command(self):
        if self.unix:
            cmd = [str(server_binary()), "--unix", str(self.unix_path)]
        else:
            cmd = [str(server_binary()), "--port", str(self.want_port),
                   "--port-file", str(self.tmp / "port")]
        cmd += ["--url-file", str(self.tmp / "url")]
        if self.orchestrator:
            cmd += ["--orchestrator", "--root", str(self.root)]
            if self.token_file:
                cmd += ["--token-file", str(self.token_file)]
            for p in self.pools:
                cmd += ["--pool", p]
        else:
            cmd += ["--workspace", str(self.workspace)]
        if self.shell:
            cmd += ["--shell", self.shell]
        if self.faults:
            cmd.append("--faults")
        for f in self.fault:
            cmd += ["--fault", f]
        return cmd + self.args

    def start(self, timeout=10):
        pf = self.tmp / "url"
        for old in (pf, self.tmp / "port"):
            if old.exists():
                old.unlink()
        if self.unix and not self.orchestrator:
            # the orchestrator makes its own socket directory private
            (self.tmp / "run").mkdir(mode=0o700, exist_ok=True)
        env = dict(os.environ)
        env.update(self.env or {})
        self._log = open(self.tmp / "server.log", "ab")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandbox-server exited with {self.proc.returncode}: "
                                   f"{self.output()[-2000:]}")
            if pf.exists():
                self.url = pf.read_text().strip()
                if not self.unix:
                    self.port = int((self.tmp / "port").read_text().strip())
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("sandbox-server did not write its port file in time")

    def output(self):
        p = self.tmp / "server.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self, timeout=15):
        """SIGTERM by PID, SIGKILL if it does not stop in time. Returns the
        exit code."""
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
        if self._log:
            self._log.close()
            self._log = None
        return rc

    def restart(self, same_port=False):
        if same_port and self.port:
            self.want_port = self.port
        self.stop()
        return self.start()

    def sanitizer_reports(self):
        """Lines of AddressSanitizer/UBSan/LeakSanitizer reports the server
        printed (a build with SANITIZE=1)."""
        return [line for line in self.output().splitlines()
                if "Sanitizer" in line or "runtime error:" in line]

    def cleanup(self, check=True):
        """Stop the server and remove its temp dir. With check, a
        sanitizer report in its output fails the caller."""
        self.stop()
        reports = self.sanitizer_reports() if check else []
        if self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        assert not reports, "sandbox-server reported:\n" + "\n".join(reports[:20])

    def client(self, **kw):
        kw.setdefault("token", self.token)
        return Client(self.url, **kw)

    def vm_hwm_kib(self):
        """Peak resident memory (VmHWM) of the server in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


def start_server(**kw):
    """Start a Server (see its arguments) and return it; call .cleanup()."""
    return Server(**kw).start()


class LocalOrchestrator:
    """The orchestrator of a `sandboxfs --local` mount, by its state
    directory: what it wrote there (its URL and token, both secrets)."""

    def __init__(self, state):
        self.state = Path(state)

    def __repr__(self):
        return "<sbx.LocalOrchestrator>"

    @property
    def url(self):
        return (self.state / "local.url").read_text().strip()

    @property
    def token(self):
        return (self.state / "local.token").read_text().strip()

    def client(self, **kw):
        kw.setdefault("token", self.token)
        return Client(self.url, **kw)


def local_orchestrator(tmp):
    """The mounted tests' orchestrator: fault routes on, its state in
    tmp/orch. Use it as a context manager: `with local_orchestrator(t) as o`."""
    (tmp / "orch").mkdir(exist_ok=True)
    return Server(orchestrator=True, faults=True, tmp=tmp / "orch")


def sandbox_url(orch, sid):
    """The URL of a sandbox, from the orchestrator (never print it)."""
    r = orch.client().sandbox(sid)
    assert r.status == 200, r.status
    return r.json()["url"]


def executed(orch, sid):
    """Commands the sandbox's /execute received, oldest first."""
    return [c if isinstance(c, str) else c.get("command")
            for c in log(sandbox_url(orch, sid))]


# --- shortcuts taking a URL ---
def execute(url, command, timeout_seconds=None, token=None):
    return Client(url, token).execute(command, timeout_seconds)


def put(url, path, data):
    return Client(url).put(path, data)


def get(url, path):
    return Client(url).get(path)


def list_dir(url, path=""):
    return Client(url).list(path)


def delete(url, path):
    return Client(url).delete(path)


def mount_files_left(url):
    """What a mount's runs left in a sandbox's workspace, through the
    contract: stdin uploads and per-run directories in the root, and in the
    kept .sandboxfs-out directory (mount/stream.c) anything but its status
    file `rc`. The change list's marks (.sandboxfs-mark.*) and its clock
    probe (.sandboxfs-tick) stay by design."""
    root = [e["name"] for e in list_dir(url, "").json()["entries"]]
    left = [n for n in root if n.startswith((".sandboxfs-run", ".sandboxfs-stdin"))]
    if ".sandboxfs-out" in root:
        r = list_dir(url, ".sandboxfs-out")
        assert r.status == 200, r
        left += [".sandboxfs-out/" + e["name"] for e in r.json()["entries"]
                 if e["name"] != "rc"]
    return left


def set_faults(url, **faults):
    return Client(url).set_faults(**faults)


def stats(url):
    return Client(url).stats()


def log(url, raw=False):
    return Client(url).log(raw)


def wait_for(predicate, timeout=10, interval=0.05):
    """Poll predicate() until it is truthy; return its value or None."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)
