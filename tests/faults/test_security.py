"""Security (DESIGN.md §1, §5, §7): the state directory is 0700 and every
file in it 0600; the sandbox URLs and the token never appear in anything
the daemon printed (also with -d), in the journal dump or in the mount's
own files; without allow_other another user gets EACCES; TLS peers are
verified by default.
"""
import errno
import grp
import json
import os
import shutil
import ssl
import stat
import subprocess
import tempfile
import time

import pytest

import faultlib as fl
from faultlib import ctl, sandbox_url, write_file
from fakeserver import FakeServer
import mount
import sbx


def walk_modes(root, skip=()):
    """(path, mode) of everything under root, root included; skips the
    subtrees named in skip (relative paths)."""
    out = [(root, os.lstat(root).st_mode)]
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if os.path.normpath(os.path.join(rel, d)) not in skip]
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            out.append((p, os.lstat(p).st_mode))
    return out


def check_private(root, skip=()):
    bad = []
    entries = walk_modes(root, skip)
    for p, mode in entries:
        perm = stat.S_IMODE(mode)
        if stat.S_ISDIR(mode):
            if perm != 0o700:
                bad.append((p, oct(perm)))
        elif stat.S_ISREG(mode):
            if perm & 0o077 or perm & 0o600 != 0o600:
                bad.append((p, oct(perm)))
        elif not stat.S_ISSOCK(mode) and not stat.S_ISFIFO(mode):
            bad.append((p, "unexpected type"))
    assert not bad, bad[:20]
    return len(entries)


def busy_session(m, orch, sid="sec1"):
    """Commands, outputs, a pending upload, an attach: every kind of
    state file there is. Returns the sandbox URL."""
    os.mkdir(m.path(sid))
    url = sandbox_url(orch, sid)
    m.secrets.append(url)
    d = m.path(sid)
    assert ctl(d / "ctl", "seq 1 50000")[0] == 0  # output large enough for a file
    assert ctl(d / "ctl", "echo err >&2; exit 3")[0] == 0
    ws = d / "workspace"
    assert write_file(ws / "a.txt", b"a" * 10000) == (0, 0)
    assert mount.read(ws / "a.txt")
    sbx.set_faults(url, error_rate=1.0, routes="files")
    assert write_file(ws / "pending.txt", b"p" * 1000)[1] == errno.EIO
    sbx.set_faults(url, lose_answer=True, routes="execute")
    assert ctl(d / "ctl", "echo lost")[0] == errno.EIO
    sbx.set_faults(url)
    assert ctl(m.path(".sandboxfs", "ctl"), f"attach att1 {url}")[0] == 0
    assert ctl(m.path(".sandboxfs", "ctl"), "attach att2 http://127.0.0.1:1")[0] == 0
    assert ctl(m.path("att2", "ctl"), "echo x")[0] == errno.ENOTCONN
    return url


def test_state_dir_0700_files_0600(mounts):
    old = os.umask(0o022)
    try:
        m = mounts()
        busy_session(m, mounts.orch)
        n = check_private(m.state)
        m.stop()
        n2 = check_private(m.state)
    finally:
        os.umask(old)
    assert n >= 5 and n2 >= 5, (n, n2)
    mounts.allow += [r"."]


def test_local_state_dir_private(tmp_path):
    old = os.umask(0o000)  # the most permissive umask a user can have
    m = mount.Mount(tmp_path, local=True)
    try:
        m.start()
        os.mkdir(m.path("loc1"))
        assert ctl(m.path("loc1", "ctl"), "echo hi > f.txt")[0] == 0
        assert write_file(m.path("loc1", "workspace", "g.txt"), b"g") == (0, 0)
        tok = (m.state / "local.token").read_text().strip()
        m.secrets.append(tok)
        # the sandboxes' workspaces hold the user's own files, with the
        # modes commands gave them: only the machinery around them is checked
        ws_dirs = set()
        for dirpath, dirnames, _ in os.walk(m.state):
            if "workspace" in dirnames:
                ws_dirs.add(os.path.normpath(os.path.relpath(os.path.join(dirpath, "workspace"),
                                                             m.state)))
        check_private(m.state, skip=ws_dirs)
    finally:
        m.stop()
        os.umask(old)
    m.check_log()


def grep_secrets(text, secrets):
    found = [s for s in secrets if s and s in text]
    assert not found, f"{len(found)} secret(s) appeared"


def url_secrets(url):
    port = url.rsplit(":", 1)[1].strip("/")
    return [url, f"127.0.0.1:{port}", f":{port}"]


def test_no_secret_in_any_output_even_with_debug(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, debug=True)
    urls = []
    with m:
        url = busy_session(m, orch)
        urls.append(url)
        # the mount's own files and attributes
        for dirpath, dirnames, filenames in os.walk(m.mnt):
            dirnames[:] = [d for d in dirnames if d != "workspace"]
            for n in filenames:
                p = os.path.join(dirpath, n)
                if n in ("ctl",):
                    continue
                try:
                    grep_secrets(open(p, errors="replace").read(), url_secrets(url) + [orch.token])
                except OSError:
                    pass
        p = subprocess.run(["getfattr", "-R", "-d", "-m", "-", str(m.path("sec1"))],
                           capture_output=True, text=True, timeout=30)
        grep_secrets(p.stdout + p.stderr, url_secrets(url) + [orch.token])
        # commands and failures in debug mode
        sbx.set_faults(url, error_rate=1.0, routes="all")
        ctl(m.path("sec1", "ctl"), "echo boom")
        with pytest.raises(OSError):
            os.listdir(m.path("sec1", "workspace", "a-new-dir"))
        sbx.set_faults(url)
    out = m.output()
    assert len(out) > 1000 and "sec1" in out  # -d did print a lot
    secrets = [orch.token, orch.token_file.read_text().strip()]
    for u in urls:
        secrets += url_secrets(u)
    grep_secrets(out, secrets)
    # the plain-text journal, the preflight check
    for args in (["--dump-journal", str(m.state)],
                 ["--check", "-o", f"orchestrator={orch.url},token_file={orch.token_file}"]):
        p = subprocess.run([str(mount.sandboxfs_binary()), *args], capture_output=True,
                           text=True, timeout=30)
        grep_secrets(p.stdout + p.stderr, secrets)
    assert "sec1" in subprocess.run([str(mount.sandboxfs_binary()), "--dump-journal",
                                     str(m.state)], capture_output=True, text=True,
                                    timeout=30).stdout
    # nothing the daemon wrote outside the state dir: the log, the state
    for dirpath, _, filenames in os.walk(m.state):
        for n in filenames:
            p = os.path.join(dirpath, n)
            if n.startswith("journal"):
                continue  # holds the URL by design (0600), never printed
            data = open(p, "rb").read().decode("latin-1")
            grep_secrets(data, [orch.token])


def test_token_from_env_never_printed(tmp_path, orch):
    env = {"SANDBOXFS_TOKEN": orch.token}
    m = mount.Mount(tmp_path, opts=[f"orchestrator={orch.url}"], env=env, debug=True)
    m.secrets.append(orch.token)
    with m:
        os.mkdir(m.path("env1"))
        assert ctl(m.path("env1", "ctl"), "echo ok")[0] == 0
    grep_secrets(m.output(), [orch.token])
    p = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=10)
    grep_secrets(p.stdout, [orch.token])


def as_nobody(*argv):
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--", *argv], capture_output=True, text=True, timeout=30)


def test_other_user_gets_eacces_without_allow_other(orch):
    if os.getuid() != 0:
        pytest.skip("needs root to switch to nobody")
    top = tempfile.mkdtemp(prefix="sbxfs-sec-")
    try:
        os.chmod(top, 0o755)
        mp = os.path.join(top, "mnt")
        os.mkdir(mp)
        os.chmod(mp, 0o755)
        # Control: nobody can reach the directory itself before the mount.
        assert as_nobody("stat", mp).returncode == 0
        m = mount.Mount(top, server=orch, mountpoint=mp, state=os.path.join(top, "state"))
        with m:
            os.mkdir(m.path("priv"))
            assert write_file(m.path("priv", "workspace", "s.txt"), b"secret") == (0, 0)
            for argv in (["ls", mp], ["stat", mp], ["cat", f"{mp}/priv/workspace/s.txt"],
                         ["sh", "-c", f"echo 'id' > {mp}/priv/ctl"],
                         ["cat", f"{mp}/.sandboxfs/health"]):
                p = as_nobody(*argv)
                assert p.returncode != 0, argv
                assert "Permission denied" in p.stderr, (argv, p.stderr)
            # the owner is not affected
            assert mount.read(m.path("priv", "workspace", "s.txt")) == "secret"
        assert fl.executed(orch, "priv") == []
        m.check_log()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def make_cert(d):
    key, crt = os.path.join(d, "key.pem"), os.path.join(d, "crt.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", crt], check=True, capture_output=True, timeout=60)
    return key, crt


def test_tls_peer_verified_by_default(mounts, tmp_path):
    key, crt = make_cert(str(tmp_path))
    f = FakeServer()
    f.route("POST", "/execute", 200, {"exitCode": 0, "stdout": "pwned\n", "stderr": "",
                                      "durationMillis": 1, "truncated": False})
    f.route("GET", "/healthz", 200, {"status": "ok"})
    f.route("GET", "/files/", 200, {"entries": []})
    f.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    f.httpd.socket = ctx.wrap_socket(f.httpd.socket, server_side=True)
    try:
        # The server works for a client that trusts its certificate.
        import http.client
        c = http.client.HTTPSConnection("127.0.0.1", f.port, timeout=10,
                                        context=ssl.create_default_context(cafile=crt))
        c.request("GET", "/healthz")
        assert c.getresponse().status == 200
        c.close()
        n = len(f.requests)
        m = mounts()
        url = f"https://127.0.0.1:{f.port}"
        m.secrets += url_secrets(url)
        assert ctl(m.path(".sandboxfs", "ctl"), f"attach tls1 {url}")[0] == 0
        err, _ = ctl(m.path("tls1", "ctl"), "echo hi")
        assert err in (errno.ENOTCONN, errno.EIO, errno.EACCES), fl.errname(err)
        assert mount.read(m.path("tls1", "stdout")) != "pwned\n"
        with pytest.raises(OSError):
            os.listdir(m.path("tls1", "workspace"))
        assert len(f.requests) == n, "a request went through an unverified TLS peer"
    finally:
        f.stop()
    mounts.allow += [r"."]


def test_allow_other_enforces_the_modes_shown(orch):
    """With allow_other another user may read what is readable by all, and
    may write nothing that is not theirs: ctl, .sandboxfs/ctl, timeout and
    a 0644 workspace file answer EACCES, and nothing reaches the server."""
    if os.getuid() != 0:
        pytest.skip("needs root to switch to nobody")
    top = tempfile.mkdtemp(prefix="sbxfs-other-")
    try:
        os.chmod(top, 0o755)
        mp = os.path.join(top, "mnt")
        os.mkdir(mp)
        os.chmod(mp, 0o755)
        m = mount.Mount(top, server=orch, mountpoint=mp, state=os.path.join(top, "state"),
                        opts=["allow_other"])
        with m:
            os.mkdir(m.path("shared"))
            url = sandbox_url(orch, "shared")
            ws = m.path("shared", "workspace")
            assert write_file(ws / "f.txt", b"mine\n") == (0, 0)
            st = os.stat(ws / "f.txt")
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
            # reading what is readable by all works for nobody
            p = as_nobody("cat", f"{mp}/shared/workspace/f.txt")
            assert (p.returncode, p.stdout) == (0, "mine\n"), p.stderr
            p = as_nobody("cat", f"{mp}/shared/status")
            assert p.returncode == 0, p.stderr
            writes = {
                "ctl": f"echo id > {mp}/shared/ctl",
                "mctl": f"echo 'detach shared' > {mp}/.sandboxfs/ctl",
                "timeout": f"echo 5 > {mp}/shared/timeout",
                "file": f"echo theirs > {mp}/shared/workspace/f.txt",
                "append": f"echo theirs >> {mp}/shared/workspace/f.txt",
                "create": f"echo new > {mp}/shared/workspace/new.txt",
                "rm": f"rm -f {mp}/shared/workspace/f.txt",
            }
            for what, cmd in writes.items():
                p = as_nobody("sh", "-c", cmd)
                assert p.returncode != 0, what
                assert "Permission denied" in p.stderr, (what, p.stderr)
            # nothing changed, on the mount or on the server
            assert fl.executed(orch, "shared") == []
            r = sbx.get(url, "f.txt")
            assert (r.status, r.body) == (200, b"mine\n")
            assert mount.read(m.path("shared", "timeout")).strip() == "60"
            assert os.path.isdir(m.path("shared"))
            # the owner is not affected
            assert ctl(m.path("shared", "ctl"), "echo ok")[0] == 0
        m.check_log()
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_token_file_readable_by_others_is_refused(orch, tmp_path, mode):
    """As ssh refuses a private key others can read: the error names the
    file and the mode to set, never the token, and nothing is mounted."""
    leaky = tmp_path / "leaky-token"
    leaky.write_text(orch.token + "\n")
    os.chmod(leaky, mode)
    m = mount.Mount(tmp_path, server=orch, opts=[f"token_file={leaky}"])
    rc, out = m.run_daemon()
    assert rc != 0
    assert str(leaky) in out and "chmod 600" in out and f"{mode:04o}" in out, out
    assert orch.token not in out
    # the same token in a private file mounts
    os.chmod(leaky, 0o600)
    with mount.Mount(tmp_path, server=orch, opts=[f"token_file={leaky}"]) as m2:
        os.mkdir(m2.path("tok"))
        assert ctl(m2.path("tok", "ctl"), "echo ok")[0] == 0
    m2.check_log()


class MountAsGroup(mount.Mount):
    """The daemon run as root with another real and effective group, so
    that /proc shows whether it is dumpable: the kernel gives a
    non-dumpable process's /proc/PID files to root:root. allow_other,
    because FUSE lets in only the mounting user's own group otherwise."""

    def command(self):
        return ["setpriv", "--regid=nogroup", "--clear-groups", "--"] + super().command()


def test_daemon_memory_is_private_unless_debugging(orch, tmp_path):
    """No core file and no reading or tracing of the daemon by other
    processes of the same user (the token and the sandbox URLs are in its
    memory); -d keeps it debuggable."""
    if os.getuid() != 0:
        pytest.skip("needs root to run the daemon with another group")
    nogroup = grp.getgrnam("nogroup").gr_gid
    with MountAsGroup(tmp_path / "a", server=orch, opts=["allow_other"]) as m:
        pid = m.proc.pid
        assert open(f"/proc/{pid}/status").read().count(f"Gid:\t{nogroup}\t") == 1
        limits = open(f"/proc/{pid}/limits").read()
        core = next(l for l in limits.splitlines() if l.startswith("Max core file size"))
        assert core.split()[4:6] == ["0", "0"], core
        assert os.stat(f"/proc/{pid}/environ").st_gid == 0
    with MountAsGroup(tmp_path / "b", server=orch, opts=["allow_other"], debug=True) as m:
        pid = m.proc.pid
        assert os.stat(f"/proc/{pid}/environ").st_gid == nogroup
        limits = open(f"/proc/{pid}/limits").read()
        core = next(l for l in limits.splitlines() if l.startswith("Max core file size"))
        assert core.split()[4:6] != ["0", "0"], core
