"""fakeserver — a tiny scriptable HTTP server on 127.0.0.1 (an ephemeral
port, or the one given to ``start(port)``) for answers the real local server
never gives: hostile orchestrators and sandboxes (wrong types, missing
fields, bad URLs, oversized bodies), or a stranger on a port sandboxfs used.

    fs = FakeServer().start()
    fs.route("GET", "/v1/sandbox", 200, {"sandboxes": []})   # JSON body
    fs.route("POST", "/execute", 200, b"raw bytes")           # bytes body
    fs.route("GET", "/files/", handler)   # handler(req) -> (status, body[, headers])
    fs.route("GET", "/files/x", lambda req: (200, chunks()))  # a generator:
                                          # streamed, no length, ends at close
    ...
    fs.requests  # [(method, path)], in order
    fs.stop()

Routes match by method and longest path prefix; the rest answer 404
{"error": "no route"}. The server never logs to stderr.
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _serve(self):
        srv = self.server.fake
        n = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(n) if n else b""
        with srv.lock:
            srv.requests.append((self.command, self.path))
        status, body, headers = srv.answer(self)
        if status is None:  # close without answering
            self.close_connection = True
            return
        if hasattr(body, "__next__"):  # streamed as it comes; the end is the close
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            try:
                for chunk in body:
                    if srv.stopping.is_set():
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:
                pass  # the client went away
            return
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" in headers:  # announces a length it may not send
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up is part of the tests


class FakeServer:
    def __init__(self):
        self.routes = {}
        self.requests = []
        self.stopping = threading.Event()  # ends streamed bodies
        self.lock = threading.Lock()
        self.httpd = None
        self.thread = None
        self.port = None
        self.url = None

    def __repr__(self):
        return "<fakeserver.FakeServer>"

    def route(self, method, prefix, status_or_handler, body=b""):
        with self.lock:
            self.routes[(method, prefix)] = (status_or_handler, body)

    def answer(self, req):
        with self.lock:
            best = None
            for (m, prefix), v in self.routes.items():
                if m == req.command and req.path.startswith(prefix):
                    if best is None or len(prefix) > len(best[0]):
                        best = (prefix, v)
        if best is None:
            return 404, {"error": "no route"}, {}
        what, body = best[1]
        if callable(what):
            r = what(req)
            return (r + ({},))[:3] if len(r) == 2 else r
        return what, body, {}

    def start(self, port=0):
        self.httpd = _Quiet(("127.0.0.1", port), _Handler)
        self.httpd.fake = self
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def count(self, method=None, prefix=""):
        with self.lock:
            return sum(1 for m, p in self.requests
                       if (method is None or m == method) and p.startswith(prefix))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
