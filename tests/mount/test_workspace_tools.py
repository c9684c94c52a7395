"""Real programs in ID/workspace/: editors, git, tar, rsync, make, fio.

Each result is compared on the server side: through the sandbox contract
(GET, listing, /execute in the sandbox), or for whole trees with diff -r
against the sandbox's workspace directory of the local server, never
through the mount.
"""
import hashlib
import os
import shutil
import subprocess

import pytest

from conftest import sandbox_url
import mount
import sbx

sh = mount.sh


def need(*progs):
    for p in progs:
        if shutil.which(p) is None:
            pytest.fail(f"{p} is not installed (setup.sh PACKAGES lists it)")


@pytest.fixture
def ws(sandbox):
    return sandbox / "workspace"


@pytest.fixture
def url(orch, sandbox):
    return sandbox_url(orch, "sbx1")


@pytest.fixture
def server_ws(orch, sandbox):
    """The sandbox's workspace as the local server keeps it."""
    d = orch.root / "sbx1" / "workspace"
    assert d.is_dir()
    return d


def sget(url, path):
    r = sbx.get(url, path)
    return r.body if r.status == 200 else None


def names(url, path=""):
    r = sbx.list_dir(url, path)
    assert r.status == 200, r.status
    return sorted(e["name"] for e in r.json()["entries"])


def assert_same_tree(url, local, remote):
    """The sandbox's tree at remote, read through the contract (listings
    and GETs), equals the local directory, names and bytes."""
    client = sbx.Client(url, keep_alive=True)
    try:
        todo = [("", "")]
        count = 0
        while todo:
            lrel, rrel = todo.pop()
            ldir = os.path.join(local, lrel)
            r = client.list(f"{remote}/{rrel}".rstrip("/"))
            assert r.status == 200, (rrel, r.status)
            entries = {e["name"]: e for e in r.json()["entries"]}
            assert sorted(entries) == sorted(os.listdir(ldir)), rrel
            for name, e in entries.items():
                lp = os.path.join(ldir, name)
                if e["isDir"]:
                    assert os.path.isdir(lp), lp
                    todo.append((os.path.join(lrel, name), f"{rrel}/{name}".lstrip("/")))
                else:
                    body = client.get(f"{remote}/{rrel}/{name}".replace("//", "/")).body
                    with open(lp, "rb") as f:
                        assert body == f.read(), lp
                    count += 1
        return count
    finally:
        client.close()


def in_sandbox(url, command, timeout=60):
    r = sbx.execute(url, command, timeout_seconds=timeout)
    assert r.status == 200, r.status
    return r.json()


def test_vim_edit_and_save(ws, url):
    need("vim")
    sbx.put(url, "notes.txt", b"one\ntwo\nthree\n")
    # Default settings: a swap file next to the file, save in place.
    p = sh(f"cd {ws} && vim -es -u NONE -i NONE -N -c 'set swapfile directory=.' "
           f"-c '%s/two/TWO/' -c 'wq' notes.txt")
    assert p.returncode == 0, p.stderr
    assert sget(url, "notes.txt") == b"one\nTWO\nthree\n"
    # A second edit, appending a line.
    p = sh(f"cd {ws} && vim -es -u NONE -i NONE -N -c 'set swapfile directory=.' "
           f"-c 'call append(line(\"$\"), \"four\")' -c 'wq' notes.txt")
    assert p.returncode == 0, p.stderr
    assert sget(url, "notes.txt") == b"one\nTWO\nthree\nfour\n"
    assert names(url) == ["notes.txt"]  # no swap file left behind
    assert (ws / "notes.txt").read_text() == "one\nTWO\nthree\nfour\n"


def test_sed_in_place(ws, url):
    sbx.put(url, "conf.ini", b"a=1\nb=2\n")
    p = sh(f"sed -i 's/b=2/b=3/' {ws}/conf.ini && sed -i '1d' {ws}/conf.ini")
    assert p.returncode == 0, p.stderr
    assert sget(url, "conf.ini") == b"b=3\n"
    assert names(url) == ["conf.ini"]
    assert (ws / "conf.ini").read_text() == "b=3\n"


GIT_ENV = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t " \
          "GIT_COMMITTER_EMAIL=t@e GIT_CONFIG_NOSYSTEM=1 HOME=$PWD/..;"


def test_git_workflow_and_clone(ws, url, tmp_path):
    need("git")
    script = f"""set -e
cd {ws}; {GIT_ENV}
git init -q -b main repo; cd repo
printf 'hello\\n' > a.txt; mkdir src; printf 'int x;\\n' > src/x.c
git add -A; git commit -qm first
git branch feature; git checkout -q feature
printf 'feature\\n' >> a.txt; git commit -qam second
git checkout -q main
test "$(cat a.txt)" = hello
git rm -q src/x.c; git commit -qm third; test ! -e src/x.c
git checkout -q feature; test -e src/x.c; git checkout -q main
git gc -q
git status --porcelain | wc -l
git log --oneline --all | wc -l
git fsck --strict
"""
    p = sh(script, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == ["0", "3"]
    # The sandbox sees the same repository.
    r = in_sandbox(url, "cd repo && git fsck --strict && git log --oneline --all | wc -l "
                        "&& git show feature:a.txt")
    assert r["exitCode"] == 0, r["stderr"]
    assert r["stdout"].split("\n")[:3] == ["3", "hello", "feature"]

    # A clone of a local repository into the workspace.
    src = tmp_path / "origin"
    p = sh(f"""set -e; cd {tmp_path}; {GIT_ENV}
git init -q -b main origin; cd origin
for i in $(seq 1 20); do echo "line $i" > f$i.txt; done
git add -A; git commit -qm init; echo more >> f1.txt; git commit -qam more
""")
    assert p.returncode == 0, p.stderr
    p = sh(f"cd {ws} && {GIT_ENV} git clone -q {src} clone && cd clone && git fsck --strict "
           f"&& git status --porcelain && git log --oneline | wc -l", timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "2"
    assert sget(url, "clone/f1.txt") == b"line 1\nmore\n"
    r = in_sandbox(url, "cd clone && git fsck --strict && git status --porcelain | wc -l")
    assert r["exitCode"] == 0, r["stderr"]
    assert r["stdout"].strip() == "0"


def test_tar_roundtrip(ws, url, server_ws, tmp_path):
    src = "/usr/include/linux"
    nfiles = sum(len(f) for _, _, f in os.walk(src))
    assert nfiles >= 300
    p = sh(f"tar -C /usr/include -cf {tmp_path}/in.tar linux && "
           f"tar -C {ws} -xf {tmp_path}/in.tar", timeout=300)
    assert p.returncode == 0, p.stderr
    # Server side: the tree is there, byte for byte.
    assert assert_same_tree(url, src, "linux") == nfiles
    p = sh(f"diff -r {src} {server_ws}/linux")
    assert p.returncode == 0, p.stdout[-2000:]
    assert sget(url, "linux/types.h") == open(f"{src}/types.h", "rb").read()
    # And back out through the mount.
    p = sh(f"tar -C {ws} -cf {tmp_path}/out.tar linux && mkdir {tmp_path}/out && "
           f"tar -C {tmp_path}/out -xf {tmp_path}/out.tar && diff -r {src} {tmp_path}/out/linux",
           timeout=300)
    assert p.returncode == 0, (p.stderr + p.stdout)[-2000:]


def test_rsync_then_nothing_to_do(ws, url, server_ws, tmp_path):
    need("rsync")
    src = tmp_path / "src"
    shutil.copytree("/usr/include/linux/netfilter", src)
    os.chmod(src / sorted(os.listdir(src))[0], 0o600)
    p = sh(f"rsync -a {src}/ {ws}/dst/", timeout=300)
    assert p.returncode == 0, p.stderr
    p = sh(f"rsync -ac --dry-run --itemize-changes {src}/ {ws}/dst/", timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "", p.stdout[:2000]
    assert assert_same_tree(url, src, "dst") > 0
    # An update: changed, new and deleted files.
    files = sorted(os.listdir(src))
    with open(src / files[1], "a") as f:
        f.write("/* changed */\n")
    os.unlink(src / files[2])
    (src / "new.h").write_text("#define NEW 1\n")
    p = sh(f"rsync -a --delete {src}/ {ws}/dst/ && "
           f"rsync -ac --delete --dry-run --itemize-changes {src}/ {ws}/dst/", timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "", p.stdout[:2000]
    assert assert_same_tree(url, src, "dst") > 0
    p = sh(f"diff -r {src} {server_ws}/dst")
    assert p.returncode == 0, p.stdout[-2000:]


MAKEFILE = """\
hello: main.o greet.o
\t$(CC) -o $@ main.o greet.o
%.o: %.c greet.h
\t$(CC) -c -o $@ $<
clean:
\trm -f hello *.o
"""


def test_make_local_and_in_sandbox(ws, url, sandbox):
    need("make", "cc")
    proj = ws / "proj"
    proj.mkdir()
    (proj / "Makefile").write_text(MAKEFILE)
    (proj / "greet.h").write_text("void greet(void);\n")
    (proj / "greet.c").write_text('#include <stdio.h>\nvoid greet(void){puts("hi");}\n')
    (proj / "main.c").write_text('#include "greet.h"\nint main(void){greet();return 0;}\n')
    p = sh(f"make -C {proj} && {proj}/hello && make -C {proj} -q", timeout=120)
    assert p.returncode == 0, p.stderr
    assert "\nhi\n" in p.stdout
    # The binary the local build made runs in the sandbox too: its mode
    # reaches the sandbox before the next command.
    p = sh(f"echo ./proj/hello > {sandbox}/ctl && cat {sandbox}/exit {sandbox}/stdout")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "0\nhi\n"
    # Times stay put across a command: nothing to rebuild.
    p = sh(f"make -C {proj} -q")
    assert p.returncode == 0, p.stdout + p.stderr
    # Clean, then build inside the sandbox through ctl.
    p = sh(f"make -C {proj} clean && test ! -e {proj}/hello && "
           f"echo 'make -C proj && ./proj/hello' > {sandbox}/ctl && cat {sandbox}/exit",
           timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("\n0\n")
    assert mount.read(sandbox / "stdout").endswith("hi\n")
    assert sget(url, "proj/hello") is not None
    # What the sandbox built is up to date for make on this side too.
    p = sh(f"make -C {proj} -q")
    assert p.returncode == 0, p.stdout + p.stderr
    # Its objects show through the mount (modes set by commands do not:
    # see README, Differences from POSIX).
    assert (proj / "main.o").stat().st_size > 0


def test_fio_verify(ws):
    need("fio")
    p = sh(f"fio --name=v --filename={ws}/fio.dat --size=16M --bs=4k --rw=randwrite "
           f"--ioengine=psync --verify=crc32c --do_verify=1 --verify_fatal=1 "
           f"--verify_state_save=0 --output-format=terse", timeout=240)
    assert p.returncode == 0, p.stderr + p.stdout[-1000:]
    assert "verify" not in p.stderr.lower()


def test_cp_a_and_mv_tree(ws, server_ws):
    src = "/usr/include/linux/netfilter_ipv4"
    p = sh(f"cp -a {src} {ws}/ && diff -r {src} {ws}/netfilter_ipv4 && "
           f"mv {ws}/netfilter_ipv4 {ws}/moved && cp -a {ws}/moved {ws}/copy", timeout=120)
    assert p.returncode == 0, p.stderr
    for d in ("moved", "copy"):
        p = sh(f"diff -r {src} {server_ws}/{d}")
        assert p.returncode == 0, p.stdout[-2000:]
    assert not (server_ws / "netfilter_ipv4").exists()
    # cp -a kept the times, as this mount shows them.
    a = os.stat(f"{src}/ip_tables.h")
    b = os.stat(ws / "copy" / "ip_tables.h")
    assert int(a.st_mtime) == int(b.st_mtime)
