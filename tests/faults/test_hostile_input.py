"""Hostile input (DESIGN.md §3, §4): bad names are refused with a clear
errno before any request (the server's counters prove it), hostile
listings never become entries, and a malicious sandbox or orchestrator
(wrong types, missing fields, a URL that is not http(s), oversized or
deeply nested answers) gives an error, never a crash.

The malicious peers are fakeserver.FakeServer (Python, 127.0.0.1).
"""
import errno
import json
import os
import subprocess
import time

import pytest

import faultlib as fl
from faultlib import ctl, sandbox_url, write_file
from fakeserver import FakeServer
import mount
import sbx

SETTLE = 0.05  # the mounts below cache listings for 0 ms

BAD_NAMES = [
    (b"bad\xff\xfe", "non-UTF-8"),
    (b"over\xc0\xaflong", "overlong UTF-8 for '/'"),
    (b"ctl\x01char", "control character"),
    (b"new\nline", "newline"),
    (b"tab\there", "tab"),
    (b"del\x7f", "DEL"),
    (b"c1\xc2\x85", "C1 control"),
    (b"\x1b[31mred", "escape"),
]


def alive(m):
    """The daemon lives and answers."""
    assert m.proc is not None and m.proc.poll() is None, "sandboxfs died"
    assert mount.read(m.path(".sandboxfs", "version"))


def remote_requests(url):
    return sbx.stats(url)["requests"]


def test_bad_names_refused_before_any_request(mounts):
    m = mounts(opts=["listing_ttl=60000"])
    os.mkdir(m.path("sbx1"))
    url = sandbox_url(mounts.orch, "sbx1")
    m.secrets.append(url)
    ws = m.path("sbx1", "workspace")
    os.listdir(ws)
    os.mkdir(ws / "sub")
    os.listdir(ws / "sub")
    base = remote_requests(url)
    seen = {}
    for parent in (ws, ws / "sub"):
        for name, why in BAD_NAMES:
            p = os.fsencode(parent) + b"/" + name
            for op in ("create", "mkdir", "stat"):
                try:
                    if op == "create":
                        os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
                    elif op == "mkdir":
                        os.mkdir(p)
                    else:
                        os.stat(p)
                    raise AssertionError(f"{op} of a name with {why} succeeded")
                except OSError as e:
                    seen[(why, op)] = e.errno
                    if op == "stat":
                        assert e.errno in (errno.ENOENT, errno.EINVAL), (why, e)
                    else:
                        assert e.errno == errno.EINVAL, (why, op, e)
        # Longer than a name can be: the kernel or the daemon refuses.
        for n in (256, 300, 5000):
            try:
                write_file(parent / ("x" * n), b"x")
                os.stat(parent / ("x" * n))
                raise AssertionError(f"a {n}-byte name was accepted")
            except OSError as e:
                assert e.errno == errno.ENAMETOOLONG, e
        # rename onto a bad name
        assert write_file(parent / "ok.txt", b"ok") == (0, 0)
        base = remote_requests(url)
        with pytest.raises(OSError) as e:
            os.rename(parent / "ok.txt", os.fsencode(parent) + b"/bad\xff")
        assert e.value.errno == errno.EINVAL
    # No request of any kind reached the sandbox for the bad names.
    assert remote_requests(url) == base
    # `..` and `/` never reach the daemon inside a name: the kernel splits
    # and resolves them, so ws/../workspace is ws itself.
    assert os.path.realpath(ws / ".." / "workspace") == os.path.realpath(ws)
    for c in sbx.log(url):
        raise AssertionError("a command ran")
    alive(m)


def test_bad_sandbox_ids_and_attach_lines_refused_before_any_request(mounts):
    m = mounts()
    orch = mounts.orch
    base = orch.client().stats()
    for sid in [b"Upper", b"a_b", b"x" * 64, b"-lead", b"trail-", b"sp ace", b"\xff\xfe",
                b"a\x01b", b".hidden", b"d\xc3\xa9j\xc3\xa0"]:
        with pytest.raises(OSError) as e:
            os.mkdir(os.fsencode(m.mnt) + b"/" + sid)
        assert e.value.errno in (errno.EINVAL, errno.ENAMETOOLONG, errno.EPERM), (sid, e.value)
    after = orch.client().stats()
    assert after["creates"] == base["creates"]
    assert after["requests"] == base["requests"]
    c = m.path(".sandboxfs", "ctl")
    for line in ["attach Bad http://127.0.0.1:1",
                 "attach ok1 ftp://127.0.0.1:21/",
                 "attach ok2 file:///etc/passwd",
                 "attach ok3 http://",
                 "attach ok4 javascript:alert(1)",
                 "attach ok5 http://127.0.0.1:1/\x01",
                 "attach ok6 http://127.0.0.1:1/ trailing words",
                 "attach ok7",
                 "attach",
                 "create UPPER",
                 "frobnicate"]:
        err, _ = ctl(c, line)
        assert err == errno.EINVAL, (line.split()[:2], fl.errname(err))
    assert orch.client().stats()["requests"] == base["requests"]
    assert sorted(os.listdir(m.mnt)) == [".sandboxfs"]
    alive(m)


# --- a malicious sandbox ----------------------------------------------------

def fake_sandbox():
    f = FakeServer().start()
    f.route("GET", "/healthz", 200, {"status": "ok"})
    f.route("GET", "/files/", 200, {"entries": [{"name": "ok.txt", "size": 3, "isDir": False}]})
    f.route("GET", "/files/ok.txt", 200, b"ok\n")
    f.route("POST", "/execute", 200, {"exitCode": 0, "stdout": "", "stderr": "",
                                      "durationMillis": 1, "truncated": False})
    return f


EXEC_ANSWERS = [
    ("wrong types", {"exitCode": "zero", "stdout": 5, "stderr": [], "durationMillis": "x",
                     "truncated": "no"}),
    ("missing exitCode", {"stdout": "", "stderr": ""}),
    ("not an object", [1, 2, 3]),
    ("null", None),
    ("deep nesting", b"[" * 100000 + b"]" * 100000),
    ("oversized", b'{"exitCode":0,"stdout":"' + b"a" * (20 << 20) + b'","stderr":""}'),
    ("NUL in stdout", b'{"exitCode":0,"stdout":"a\\u0000b","stderr":"","durationMillis":1,'
                      b'"truncated":false}'),
    ("huge exit code", {"exitCode": 1e300, "stdout": "", "stderr": "", "durationMillis": 1,
                        "truncated": False}),
    ("not JSON", b"<html>hello</html>"),
]


def test_malicious_sandbox_answers_are_errors_not_crashes(mounts):
    m = mounts(opts=["listing_ttl=0"])
    with fake_sandbox() as f:
        m.secrets.append(f.url)
        assert ctl(m.path(".sandboxfs", "ctl"), f"attach evil {f.url}")[0] == 0
        d = m.path("evil")
        assert ctl(d / "ctl", "true")[0] == 0
        for why, body in EXEC_ANSWERS:
            f.route("POST", "/execute", 200, body)
            n = f.count("POST", "/execute")
            err, secs = fl.bounded(lambda: ctl(d / "ctl", "echo x"), 60, why)
            assert err in (0, errno.EIO, errno.EFBIG), (why, fl.errname(err))
            if why != "NUL in stdout":
                assert err != 0, why
                assert mount.read(d / "status") == "unknown\n", why
                assert mount.read(d / "exit") == "", why
            assert f.count("POST", "/execute") == n + 1, f"{why}: resent"
            alive(m)
        # hostile listings and files
        ws = d / "workspace"
        good = {"name": "good.txt", "size": 3, "isDir": False}
        names_bad = [{"name": "..", "size": 1, "isDir": True},
                     {"name": ".", "size": 1, "isDir": True},
                     {"name": "a/b", "size": 1, "isDir": False},
                     {"name": "", "size": 1, "isDir": False},
                     {"name": "/etc/passwd", "size": 1, "isDir": False},
                     {"name": "nl\nx", "size": 1, "isDir": False},
                     {"name": "esc\x1b[2J", "size": 1, "isDir": False},
                     {"name": 7, "size": 1, "isDir": False},
                     {"name": None, "size": 1, "isDir": False},
                     {"size": 1, "isDir": False},
                     {"name": "x" * 300, "size": 1, "isDir": False}]
        # Each bad entry is dropped; the good one beside it is shown.
        for i, e in enumerate(names_bad):
            f.route("GET", "/files/", 200, {"entries": [e, good]})
            time.sleep(SETTLE)
            names = fl.bounded(lambda: os.listdir(ws), 30, "ls")
            assert names == ["good.txt"], (i, names)
        # Bad sizes and types: the entry is dropped or the listing refused.
        for i, e in enumerate([{"name": "negative", "size": -5, "isDir": False},
                               {"name": "nosize", "isDir": False},
                               {"name": "strsize", "size": "12", "isDir": False},
                               {"name": "bigsize", "size": 1e30, "isDir": False},
                               {"name": "isdirstr", "size": 1, "isDir": "yes"}]):
            f.route("GET", "/files/", 200, {"entries": [e, good]})
            time.sleep(SETTLE)
            try:
                names = fl.bounded(lambda: os.listdir(ws), 30, "ls")
            except OSError as err:
                assert err.errno == errno.EIO, (e["name"], err)
                continue
            assert "good.txt" in names
            for n in names:
                assert os.lstat(ws / n).st_size >= 0
        # A lone surrogate (not UTF-8 once decoded): never a name, and
        # the rest of the listing stands.
        f.route("GET", "/files/", 200, b'{"entries":[{"name":"bad\\udcff","size":1,"isDir":false},'
                b'{"name":"bad\xff","size":1,"isDir":false},'
                b'{"name":"good.txt","size":3,"isDir":false}]}')
        time.sleep(SETTLE)
        assert fl.bounded(lambda: os.listdir(ws), 30, "ls") == ["good.txt"]
        for why, body in [("not an object", [1]), ("entries not a list", {"entries": 5}),
                          ("deep", b"{\"entries\":" + b"[" * 100000),
                          ("oversized", b'{"entries":[' + b'{"name":"a","size":1,"isDir":false},'
                           * (2 << 20) + b'{"name":"z","size":1,"isDir":false}]}')]:
            f.route("GET", "/files/", 200, body)
            time.sleep(SETTLE)
            with pytest.raises(OSError) as e:
                fl.bounded(lambda: os.listdir(ws), 60, why)
            assert e.value.errno in (errno.EIO, errno.EFBIG, errno.ENOTDIR), (why, e.value)
            alive(m)
        # A file whose answer is shorter than announced is not shown half.
        f.route("GET", "/files/", 200, {"entries": [{"name": "short", "size": 10,
                                                     "isDir": False}]})
        f.route("GET", "/files/short", lambda req: (200, b"abc", {"Content-Length": "10"}))
        time.sleep(SETTLE)
        p = subprocess.run(["cat", str(ws / "short")], capture_output=True, timeout=60)
        assert p.returncode != 0 and p.stdout in (b"",), p
        alive(m)
    mounts.allow += [r"."]  # the daemon reports the bad answers; secrets still checked


def test_lone_surrogate_names_hide_only_their_entries(mounts):
    """Python and Node servers send a file name that is not UTF-8 as lone
    surrogate escapes ("\\ud800abc"): valid JSON, not Unicode. That entry
    is hidden and counted in health; the rest of the directory is shown
    and usable."""
    m = mounts(opts=["listing_ttl=0"])
    with fake_sandbox() as f:
        m.secrets.append(f.url)
        f.route("GET", "/files/", 200,
                b'{"entries":[{"name":"\\ud800abc","size":1,"isDir":false},'
                b'{"name":"ok.txt","size":3,"isDir":false},'
                b'{"name":"sub","size":0,"isDir":true},'
                b'{"name":"caf\\u00e9","size":2,"isDir":false}]}')
        f.route("GET", "/files/sub", 200,
                b'{"entries":[{"name":"bad\\udcff","size":1,"isDir":false},'
                b'{"name":"\\udc00\\ud800","size":1,"isDir":true},'
                b'{"name":"in.txt","size":2,"isDir":false}]}')
        f.route("GET", "/files/sub/in.txt", 200, b"in")
        f.route("GET", "/files/caf%C3%A9", 200, b"ok")
        assert ctl(m.path(".sandboxfs", "ctl"), f"attach odd {f.url}")[0] == 0
        ws = m.path("odd", "workspace")
        assert sorted(fl.bounded(lambda: os.listdir(ws), 30, "ls")) == \
            ["café", "ok.txt", "sub"]
        assert fl.bounded(lambda: os.listdir(ws / "sub"), 30, "ls sub") == ["in.txt"]
        with open(ws / "ok.txt", "rb") as fh:
            assert fh.read() == b"ok\n"
        with open(ws / "sub" / "in.txt", "rb") as fh:
            assert fh.read() == b"in"
        assert os.stat(ws / "café").st_size == 2
        health = mount.read(m.path(".sandboxfs", "health"))
        hidden = [ln for ln in health.splitlines() if "listing entries hidden" in ln]
        assert hidden and int(hidden[0].split()[0]) >= 3, health
        stats = dict(ln.split() for ln in mount.read(m.path(".sandboxfs", "stats")).splitlines())
        assert int(stats["names_dropped"]) >= 3, stats
        alive(m)


# --- a malicious orchestrator -----------------------------------------------

def fake_orchestrator(sandboxes):
    f = FakeServer().start()
    f.route("GET", "/v1/sandbox", 200, {"sandboxes": sandboxes})
    f.route("GET", "/v1/sandbox-pool", 200, {"pools": [{"id": "default"}]})
    f.route("GET", "/v1/sandbox/", 404, {"error": "unknown"})
    f.route("DELETE", "/v1/sandbox/", 204, b"")
    return f


def orch_mount(mounts, f):
    m = mount.Mount(mounts.tmp, opts=[f"orchestrator={f.url}", "listing_ttl=0"])
    m.secrets.append(f.url)
    mounts.all.append(m)
    return m.start()


def test_malicious_orchestrator_listing_shows_only_valid_sandboxes(mounts, tmp_path):
    with sbx.Server() as real:
        good = {"id": "good", "poolId": "default", "status": "ready", "url": real.url}
        hostile = [
            {"id": "../etc", "status": "ready", "url": real.url},
            {"id": "UPPER", "status": "ready", "url": real.url},
            {"id": 12, "status": "ready", "url": real.url},
            {"status": "ready", "url": real.url},
            {"id": "ftp1", "status": "ready", "url": "ftp://127.0.0.1/"},
            {"id": "file1", "status": "ready", "url": "file:///etc/passwd"},
            {"id": "typed", "status": 5, "url": 7},
            {"id": "nourl", "status": "ready"},
            {"id": "x" * 64, "status": "ready", "url": real.url},
            "just a string",
            None,
            good,
        ]
        with fake_orchestrator(hostile) as f:
            m = orch_mount(mounts, f)
            m.secrets.append(real.url)
            names = os.listdir(m.mnt)
            for n in names:
                assert n in (".sandboxfs", "good", "ftp1", "file1", "typed", "nourl"), n
            assert "good" in names
            for sid in ("ftp1", "file1", "typed", "nourl"):
                if sid in names:  # shown, but never usable with a bad URL
                    err, _ = ctl(m.path(sid, "ctl"), "echo hi")
                    assert err != 0, sid
            assert ctl(m.path("good", "ctl"), "echo hi")[0] == 0
            assert mount.read(m.path("good", "stdout")) == "hi\n"
            # Any orchestrator answer that is not a list: an error for ls, no crash.
            for why, body in [("not object", [1]), ("sandboxes not a list", {"sandboxes": 3}),
                              ("deep", b"[" * 100000), ("not JSON", b"<html>"),
                              ("oversized", b'{"sandboxes":["' + b"a" * (9 << 20) + b'"]}')]:
                f.route("GET", "/v1/sandbox", 200, body)
                time.sleep(SETTLE)
                try:
                    fl.bounded(lambda: os.listdir(m.mnt), 60, why)
                except OSError as e:
                    assert e.errno in (errno.EIO, errno.EFBIG), (why, e)
                alive(m)
    mounts.allow += [r"."]


CREATE_ANSWERS = [
    ("ftp url", {"id": "c1", "status": "ready", "url": "ftp://127.0.0.1/"}),
    ("javascript url", {"id": "c1", "status": "ready", "url": "javascript:alert(1)"}),
    ("missing url when ready", {"id": "c1", "status": "ready"}),
    ("wrong id", {"id": "someone-else", "status": "ready", "url": "http://127.0.0.1:1"}),
    ("wrong types", {"id": 1, "status": True, "url": ["http://127.0.0.1:1"]}),
    ("not an object", [1, 2]),
    ("not JSON", b"{{{"),
    ("deep", b"{" * 50000),
    ("oversized", b'{"id":"c1","status":"ready","error":"' + b"e" * (9 << 20) + b'"}'),
]


def test_malicious_create_answers_are_errors(mounts):
    with fake_orchestrator([]) as f:
        m = orch_mount(mounts, f)
        for why, body in CREATE_ANSWERS:
            f.route("POST", "/v1/sandbox", 201, body)
            f.route("GET", "/v1/sandbox/c1", 200, body if isinstance(body, dict) else
                    {"error": "x"})
            n = f.count("POST", "/v1/sandbox")
            try:
                fl.bounded(lambda: os.mkdir(m.path("c1")), 60, why)
                ok = True
            except OSError as e:
                ok = False
                assert e.errno in (errno.EIO, errno.EFBIG, errno.EPROTO, errno.ENOTCONN,
                                   errno.EINVAL), (why, e)
            assert f.count("POST", "/v1/sandbox") == n + 1, f"{why}: create resent"
            if ok:  # accepted only as an unusable sandbox: never runs anything
                err, _ = ctl(m.path("c1", "ctl"), "echo hi")
                assert err != 0, why
            alive(m)
            # clean up whatever the mount keeps of it
            try:
                os.rmdir(m.path("c1"))
            except OSError:
                pass
            f.route("GET", "/v1/sandbox/c1", 404, {"error": "gone"})
            time.sleep(SETTLE)
    mounts.allow += [r"."]
