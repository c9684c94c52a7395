"""The embedded default (--local) and the command line (DESIGN.md §7, §8)."""
import os
import subprocess
import time

import mount
import sbx

sh = mount.sh


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_local_quickstart_and_persistence(tmp_path):
    m = mount.Mount(tmp_path, local=True)
    with m:
        p = sh(f"mkdir {m.mnt}/demo && echo 'uname -a' > {m.mnt}/demo/ctl && "
               f"cat {m.mnt}/demo/stdout")
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("Linux ")
        sh(f"echo 'echo kept > k.txt' > {m.mnt}/demo/ctl", check=True)
        pid = int((m.state / "local.pid").read_text())
        assert pid_alive(pid)
        token = (m.state / "local.token").read_text().strip()
        assert os.stat(m.state / "local.token").st_mode & 0o777 == 0o600
        m.secrets.append(token)
    # the local server stops with the mount
    assert sbx.wait_for(lambda: not pid_alive(pid), timeout=10)
    m.check_log()
    # its sandboxes persist in the state directory
    m2 = mount.Mount(tmp_path, local=True)
    with m2:
        assert os.listdir(m2.mnt) == [".sandboxfs", "demo"] or \
            sorted(os.listdir(m2.mnt)) == [".sandboxfs", "demo"]
        assert mount.read(m2.path("demo", "workspace", "k.txt")) == "kept\n"
        assert mount.read(m2.path("demo", "runs", "1", "stdout")).startswith("Linux ")
        sh(f"echo 'cat k.txt' > {m2.mnt}/demo/ctl", check=True)
        assert mount.read(m2.path("demo", "stdout")) == "kept\n"
    m2.check_log()


def test_local_commands_do_not_see_an_orchestrator_token(tmp_path):
    # The local server and its commands inherit the daemon's environment.
    secret = "sbxfs-env-token-0123456789"
    m = mount.Mount(tmp_path, local=True, env={"SANDBOXFS_TOKEN": secret})
    with m:
        p = sh(f"mkdir {m.mnt}/envtest && echo env > {m.mnt}/envtest/ctl && "
               f"cat {m.mnt}/envtest/stdout")
        assert p.returncode == 0, p.stderr
        assert "PATH=" in p.stdout  # the command did print its environment
        assert secret not in p.stdout
    m.check_log()


def test_debug_output_never_shows_secrets(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, debug=True)
    with m:
        os.mkdir(m.path("dbg"))
        url = orch.client().sandbox("dbg").json()["url"]
        m.secrets.append(url)
        sh(f"echo 'echo hi' > {m.mnt}/dbg/ctl; cat {m.mnt}/dbg/info {m.mnt}/dbg/stdout", check=True)
        with open(m.path(".sandboxfs", "ctl"), "w") as f:
            f.write(f"attach again {url}")
    out = m.output()
    assert "dbg" in out  # it did log
    for s in m.secrets:
        assert s not in out
    port = url.rsplit(":", 1)[1]
    assert f":{port}" not in out


def run(*args, timeout=20):
    return subprocess.run([str(mount.sandboxfs_binary()), *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_help_and_version():
    p = run("--help")
    assert p.returncode == 0
    for opt in ("orchestrator=URL", "token_file=PATH", "pool=NAME", "sandboxes=PATH",
                "state=DIR", "timeout=SECONDS", "listing_ttl", "attr_timeout", "cache_max", "listing_max",
                "max_runs", "max_threads", "show_machinery", "allow_other", "--local",
                "--check", "--dump-journal", "-f", "-d", "-s", "--version"):
        assert opt in p.stdout, opt
    p = run("--version")
    assert p.returncode == 0 and p.stdout.startswith("sandboxfs ")
    # the cache files' sums: ISA-L's CRC-32 whenever the build can have it
    # (setup.sh installs libisal-dev); zlib's took a quarter of the daemon's
    # CPU in a large write
    isal = subprocess.run(["pkg-config", "--exists", "libisal"]).returncode == 0
    assert f"crc32 {'isa-l' if isal else 'zlib'})" in p.stdout, p.stdout


def test_failures_before_the_mount(tmp_path, orch):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    st = f"state={tmp_path / 'state'}"
    cases = [
        (["-f", "-o", st + ",no_such_option", str(mnt)], "unknown option"),
        (["-f", "-o", st + ",orchestrator=http://127.0.0.1:1", str(mnt)], "orchestrator"),
        (["-f", "-o", st + f",orchestrator={orch.url}", str(mnt)], "token"),
        (["-f", "-o", st + ",timeout=-3", str(mnt)], "timeout"),
        (["-f", "-o", st, str(tmp_path / "missing")], "mount point"),
    ]
    bad_tok = tmp_path / "bad-token"
    bad_tok.write_text("wrong\n")
    cases.append((["-f", "-o", st + f",orchestrator={orch.url},token_file={bad_tok}", str(mnt)],
                   "token"))
    for args, word in cases:
        p = run(*args)
        assert p.returncode != 0, args
        assert word.replace(" ", "") in (p.stdout + p.stderr).lower().replace(" ", ""), \
            (args, p.stderr)
        assert not mount.is_mounted(mnt)
        assert orch.token not in p.stderr


def test_fstab_noise_is_ignored_and_check(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch, opts=["_netdev", "auto", "user", "nofail",
                                                 "rw", "defaults", "max_runs=2"])
    with m:
        os.mkdir(m.path("n"))
        for i in range(4):
            sh(f"echo 'echo {i}' > {m.mnt}/n/ctl", check=True)
        assert sorted(os.listdir(m.path("n", "runs"))) == ["3", "4"]  # bounded history
    m.check_log()
    env = dict(os.environ, SANDBOXFS_TOKEN=orch.token, XDG_STATE_HOME=str(tmp_path / "xdg"))
    p = subprocess.run([str(mount.sandboxfs_binary()), "--check", "-o",
                        f"orchestrator={orch.url}"], capture_output=True, text=True,
                       timeout=20, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "orchestrator: ok" in p.stdout
    assert orch.token not in p.stdout + p.stderr


def test_the_daemon_raises_its_open_file_limit(tmp_path, orch):
    """Hundreds of running commands hold a few descriptors each: started
    under the usual soft limit, the daemon raises it to the hard one."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        m = mount.Mount(tmp_path, server=orch).start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        limits = open(f"/proc/{m.pid}/limits").read()
        line = [ln for ln in limits.splitlines() if ln.startswith("Max open files")][0]
        got_soft, got_hard = line.split()[3:5]
        assert got_soft == got_hard == str(hard), line
    finally:
        m.stop()
