"""`meson install` puts everything in place, and the installed files work:
the binaries, the man pages, bash completion, an fstab mount through
mount(8) and mount.fuse3, and the systemd user unit's command lines.

Everything runs from DESTDIR (`meson install --destdir`), never from the
build tree."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402
import sbx  # noqa: E402

# No conftest.py here: the mount tests import theirs by the name "conftest".

class Installed:
    """Paths of an installation under DESTDIR: `abs(p)` maps an installed
    absolute path (as the installed files name it) to where it is."""

    def __init__(self, destdir, opts, version):
        self.destdir = Path(destdir)
        self.version = version
        self.prefix = opts["prefix"]
        self.bindir = os.path.join(self.prefix, opts["bindir"])
        self.mandir = os.path.join(self.prefix, opts["mandir"])
        self.datadir = os.path.join(self.prefix, opts["datadir"])

    def abs(self, path):
        assert os.path.isabs(path), path
        return self.destdir / path.lstrip("/")

    def bin(self, name):
        return self.abs(os.path.join(self.bindir, name))


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    build = str(sbx.build_dir())
    dest = tmp_path_factory.mktemp("destdir")
    p = subprocess.run(["meson", "install", "-C", build, "--destdir", str(dest),
                        "--no-rebuild", "--quiet"], capture_output=True, text=True,
                       timeout=180, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    intro = subprocess.run(["meson", "introspect", build, "--buildoptions",
                            "--projectinfo"], capture_output=True, text=True,
                           timeout=60, check=True)
    info = json.loads(intro.stdout)
    opts = {o["name"]: o["value"] for o in info["buildoptions"]}
    return Installed(dest, opts, info["projectinfo"]["version"])


@pytest.fixture
def need_fuse():
    if not mount.fuse_available():
        pytest.skip("no /dev/fuse or fusermount3")


def run(cmd, timeout=30, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, **kw)


def test_files_in_place(installed):
    for name in ("sandboxfs", "sandbox-server", "sandboxctl"):
        b = installed.bin(name)
        assert b.is_file() and os.access(b, os.X_OK), b
    man1 = installed.abs(os.path.join(installed.mandir, "man1"))
    for name in os.listdir(installed.bin("")):  # every command has its page
        assert (man1 / f"{name}.1").is_file(), f"no man page for {name}"
    comp = installed.abs(os.path.join(installed.datadir, "bash-completion", "completions"))
    assert (comp / "sandboxfs").is_file() and (comp / "sandbox-server").exists()
    unit = installed.abs(os.path.join(installed.prefix, "lib", "systemd", "user",
                                      "sandboxfs@.service"))
    assert unit.is_file()


def test_version_is_meson_version(installed):
    p = run([str(installed.bin("sandboxfs")), "--version"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == ["sandboxfs", installed.version], p.stdout
    p = run([str(installed.bin("sandbox-server")), "--version"])
    assert p.returncode == 0 and installed.version in p.stdout, p.stdout + p.stderr


def help_entries(text):
    """The option entries of --help: (first line, whole entry)."""
    entries = []
    for line in text.splitlines():
        if re.match(r"^ {4}-", line):
            entries.append([line.strip()])
        elif entries and re.match(r"^ {8,}\S", line):
            entries[-1].append(line.strip())
    return [(e[0], " ".join(e)) for e in entries]


def test_help_lists_every_option_with_its_default(installed):
    p = run([str(installed.bin("sandboxfs")), "--help"])
    assert p.returncode == 0
    entries = help_entries(p.stdout)
    names = {re.match(r"(-o \w+|-\S+)", first).group(1) for first, _ in entries}
    # every mount option the parser knows is listed
    src = (sbx.build_dir().parent / "fuse" / "options.c")
    if not src.exists():  # build dir outside the tree: find the source by meson
        src = None
    if src:
        table = re.findall(r'OPT\("([a-z_]+)[=",]', src.read_text())
        for opt in table:
            assert f"-o {opt}" in names, f"--help does not list -o {opt}"
    for first, whole in entries:
        if first.startswith("-o "):
            assert re.search(r"\((default[^)]*|[^)]*\b(off|on|none|\d[\w.]*)\b[^)]*)\)",
                             whole), f"no default given for: {whole}"


def test_man_pages_render_without_warnings(installed):
    man1 = installed.abs(os.path.join(installed.mandir, "man1"))
    help_text = run([str(installed.bin("sandboxfs")), "--help"]).stdout
    for page in ("sandboxfs.1", "sandbox-server.1", "sandboxctl.1"):
        f = man1 / page
        p = run(["groff", "-man", "-ww", "-z", str(f)])
        assert p.returncode == 0 and p.stderr == "", p.stderr
        p = run(["man", "-l", str(f)], env=dict(os.environ, MANWIDTH="80", MANPAGER="cat",
                                                PAGER="cat"))
        assert p.returncode == 0, p.stderr
        assert p.stderr.strip() == "", p.stderr
        assert installed.version in p.stdout
    text = run(["man", "-l", str(man1 / "sandboxfs.1")],
               env=dict(os.environ, MANWIDTH="200", MANPAGER="cat")).stdout
    text = re.sub(r"‐\n\s*", "", text)  # hyphenation
    for first, _ in help_entries(help_text):
        name = re.match(r"(-o \w+|--?[\w-]+)", first).group(1)
        assert name in text, f"the man page does not document {name}"
    for section in ("SYNOPSIS", "OPTIONS", "FAILURE SEMANTICS", "EXIT STATUS", "FILES",
                    "EXAMPLES", "fuse.sandboxfs", "sandboxfs@"):
        assert section in text, section


def complete(installed, words, env=None):
    comp = installed.abs(os.path.join(installed.datadir, "bash-completion", "completions",
                                      "sandboxfs"))
    words_q = " ".join(shlex.quote(w) for w in words)
    script = (f"source {shlex.quote(str(comp))}; COMP_WORDS=({words_q}); "
              f"COMP_CWORD={len(words) - 1}; _sandboxfs; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    p = run(["bash", "--norc", "-c", script], env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_bash_completion(installed, tmp_path):
    assert complete(installed, ["sandboxfs", "-o", "time"]) == ["timeout="]
    assert complete(installed, ["sandboxfs", "-o", "pool=a,tok"]) == ["pool=a,token_file="]
    assert "--local" in complete(installed, ["sandboxfs", "--lo"])
    (tmp_path / "mnt").mkdir()
    assert complete(installed, ["sandboxfs", str(tmp_path / "mn")]) == [str(tmp_path / "mnt")]
    # bash-completion finds it where it was installed, for both commands
    loader = "/usr/share/bash-completion/bash_completion"
    if not os.path.exists(loader):
        pytest.skip("bash-completion is not installed")
    share = installed.abs(installed.datadir)
    script = (f"source {loader}; for c in sandboxfs sandbox-server; do "
              f"__load_completion $c || exit 1; complete -p $c; done")
    p = run(["bash", "--norc", "-c", script], env=dict(os.environ, XDG_DATA_DIRS=str(share)))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "-F _sandboxfs sandboxfs" in p.stdout and "_sandbox_server sandbox-server" in p.stdout


def sandboxfs_daemons(mnt):
    """PIDs of sandboxfs processes that serve mnt."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"sandboxfs" and \
                str(mnt).encode() in argv:
            pids.append(int(d))
    return pids


def wait_gone(pids, timeout=15):
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if os.path.exists(f"/proc/{p}") and
                not open(f"/proc/{p}/stat").read().split(") ")[1].startswith("Z")]
        time.sleep(0.05)
    for p in left:
        os.kill(p, signal.SIGKILL)
    return not left


def in_private_namespace(script, timeout=60):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private mount namespace")
    return run(["unshare", "-m", "--propagation", "private", "bash", "-euc", script],
               timeout=timeout)


@pytest.mark.parametrize("source,opts", [("local", ""), ("sandboxfs", "local,")])
def test_fstab_mount_and_umount(installed, tmp_path, need_fuse, source, opts):
    """mount MOUNTPOINT with a scratch fstab line of type fuse.sandboxfs:
    mount(8) runs mount.fuse3, which runs `sandboxfs local MNT -o opts`
    found in the default PATH, where the installed bindir is put (as a
    tmpfs of links in the private namespace, so the host is untouched)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text(f"# scratch fstab\n{source} {mnt} fuse.sandboxfs "
                     f"{opts}noauto,_netdev,state={tmp_path / 'state'} 0 0\n")
    bindir = installed.bin("")
    links = "; ".join(f"ln -s {shlex.quote(str(bindir / n))} /usr/local/bin/{n}"
                      for n in ("sandboxfs", "sandbox-server"))
    script = f"""
        mount -t tmpfs tmpfs /usr/local/bin
        {links}
        mount -T {fstab} {mnt}
        findmnt -n -o FSTYPE,SOURCE {mnt}
        mkdir {mnt}/t
        echo 'echo fstab-ok; readlink /proc/$PPID/exe' > {mnt}/t/ctl
        cat {mnt}/t/stdout
        umount {mnt}
        findmnt {mnt} && exit 9 || true
    """
    try:
        p = in_private_namespace(script)
    finally:
        # the daemon lives on in the namespace until its mount goes: it must
        # exit by itself after umount (killed here otherwise, and the test fails)
        exited = wait_gone(sandboxfs_daemons(mnt))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.split("\n")
    assert lines[0].split() == ["fuse.sandboxfs", "sandboxfs"], p.stdout
    # the command ran in a sandbox of the local server installed in DESTDIR
    assert str(installed.bin("sandbox-server")) in lines, p.stdout
    assert "fstab-ok" in lines
    assert exited, "sandboxfs did not exit after umount"
    # the local server it started came from DESTDIR, and stopped with it
    assert not mount.is_mounted(mnt)


def unit_lines(installed):
    unit = installed.abs(os.path.join(installed.prefix, "lib", "systemd", "user",
                                      "sandboxfs@.service"))
    keys = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip())
    return keys


def unit_expand(installed, value, instance, home, env):
    """What systemd does to an Exec line: %i and %h, then ${VAR} as one
    word, split; the installed paths it names are mapped into DESTDIR."""
    value = value.replace("%i", instance).replace("%h", str(home))
    argv = []
    for w in shlex.split(value):
        m = re.fullmatch(r"\$\{(\w+)\}", w)
        if m:
            w = env.get(m.group(1), "")
        argv.append(w)
    if argv[0].startswith(installed.prefix + "/"):
        argv[0] = str(installed.abs(argv[0]))
    return argv


def unit_env(keys, home, instance):
    env = {}
    for e in keys.get("Environment", []):
        for kv in shlex.split(e):
            k, v = kv.split("=", 1)
            env[k] = v
    for f in keys.get("EnvironmentFile", []):
        path = f.lstrip("-").replace("%h", str(home)).replace("%i", instance)
        if os.path.exists(path):
            for line in open(path):
                line = line.strip()
                if line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    env[k] = v
        else:
            assert f.startswith("-"), "a missing environment file would stop the unit"
    return env


@pytest.mark.parametrize("config", ["local", "orchestrator"])
def test_systemd_unit_exec_lines(installed, tmp_path, need_fuse, config):
    keys = unit_lines(installed)
    assert keys["Type"] == ["simple"]
    home = tmp_path / "home"
    home.mkdir()
    instance = "work"
    orch = None
    if config == "orchestrator":
        (tmp_path / "orch").mkdir()
        orch = sbx.Server(orchestrator=True, tmp=tmp_path / "orch")
        orch.start()
        cfg = home / ".config" / "sandboxfs"
        cfg.mkdir(parents=True)
        (cfg / f"{instance}.env").write_text(
            f"SANDBOXFS_SOURCE={orch.url}\n"
            f"SANDBOXFS_OPTIONS=token_file={orch.token_file},pool=default\n")
    env = unit_env(keys, home, instance)
    penv = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SANDBOXFS_"))}
    penv["HOME"] = str(home)
    mnt = home / "sandboxes" / instance
    proc = None
    try:
        for line in keys.get("ExecStartPre", []):
            p = run(unit_expand(installed, line, instance, home, env), env=penv)
            assert p.returncode == 0, p.stderr
        (start,) = keys["ExecStart"]
        argv = unit_expand(installed, start, instance, home, env)
        assert "-f" in argv and argv[0] == str(installed.bin("sandboxfs"))
        log = open(tmp_path / "unit.log", "wb")
        proc = subprocess.Popen(argv, env=penv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        assert sbx.wait_for(lambda: mount.is_mounted(mnt) or proc.poll() is not None,
                            timeout=20)
        assert proc.poll() is None, (tmp_path / "unit.log").read_text()
        os.mkdir(mnt / "u1")
        with open(mnt / "u1" / "ctl", "w") as f:
            f.write("echo unit-ok")
        assert mount.read(mnt / "u1" / "stdout") == "unit-ok\n"
        if orch:
            assert orch.client().sandbox("u1").status == 200
        (stop,) = keys["ExecStop"]
        p = run(unit_expand(installed, stop, instance, home, env), env=penv)
        assert p.returncode == 0, p.stderr
        assert proc.wait(15) == 0, (tmp_path / "unit.log").read_text()
        proc = None
        assert not mount.is_mounted(mnt)
        out = (tmp_path / "unit.log").read_text()
        assert not re.search(r"error|warning", out, re.I), out
        if orch:
            assert orch.token not in out
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        if mount.is_mounted(mnt):
            run([mount.FUSERMOUNT, "-u", "-z", str(mnt)])
        if orch:
            orch.cleanup()


def test_systemd_unit_verifies(installed, tmp_path):
    """systemd-analyze verify accepts the unit (an instance of it, with the
    installed paths mapped into DESTDIR), and its Documentation= resolves
    to the installed man page."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("no systemd-analyze")
    unit = installed.abs(os.path.join(installed.prefix, "lib", "systemd", "user",
                                      "sandboxfs@.service")).read_text()
    unit = unit.replace(installed.bindir + "/", str(installed.bin("")) + "/")
    inst = tmp_path / "sandboxfs@check.service"
    inst.write_text(unit)
    man = installed.abs(installed.mandir)
    p = run(["systemd-analyze", "verify", str(inst)], env=dict(os.environ, MANPATH=str(man)))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.strip() == "", p.stderr
