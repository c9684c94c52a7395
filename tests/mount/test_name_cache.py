"""The kernel's name and attribute cache (-o attr_timeout) never shows
what a command changed: names a command removed can be created again at
once, sizes it changed are seen by the next stat, and `ls -l` of a large
directory is served by READDIRPLUS (one listing, no lookup per name).

The mounts here use attr_timeout=30, so that anything the kernel keeps
would still be there when the test looks; results are checked on the
server side through the contract.
"""
import errno
import os

import pytest

from conftest import sandbox_url
import mount
import sbx

sh = mount.sh


def cached_mount(tmp_path, orch, debug):
    m = mount.Mount(tmp_path, server=orch, opts=["attr_timeout=30"], debug=debug)
    m.start()
    try:
        os.mkdir(m.path("nc"))
        url = sandbox_url(orch, "nc")
        m.secrets.append(url)
        yield m, m.path("nc"), url
    finally:
        m.stop()
    if not debug:  # -d prints every error answer
        m.check_log()


@pytest.fixture
def cached(tmp_path, orch):
    yield from cached_mount(tmp_path, orch, False)


@pytest.fixture
def cached_debug(tmp_path, orch):
    yield from cached_mount(tmp_path, orch, True)


def run(sandbox, command):
    p = sh(f"echo {sh_quote(command)} > {sandbox}/ctl")
    assert p.returncode == 0, p.stderr
    assert (sandbox / "exit").read_text().strip() == "0"


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def sget(url, path):
    r = sbx.get(url, path)
    return r.body if r.status == 200 else None


def stale_answers(m):
    """ESTALE answers the mount gave (-d prints every error answer)."""
    return m.output().count("error: -116")


def kernel_epochs(m):
    """Name-cache epochs the mount sent after commands (0 on a kernel
    before Linux 6.16, which has none: ESTALE is the fallback there)."""
    for line in m.path(".sandboxfs", "stats").read_text().splitlines():
        k, _, v = line.partition(" ")
        if k == "kernel_epochs":
            return int(v)
    raise AssertionError("stats has no kernel_epochs line")


def kernel_has_epoch():
    """Linux 6.16 added FUSE_NOTIFY_INC_EPOCH."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 16)


def test_names_a_command_removed_can_be_created_again(cached_debug):
    m, sb, url = cached_debug
    ws = sb / "workspace"
    for name in ("a", "b", "c", "t"):
        (ws / name).write_text("old\n")
    os.mkdir(ws / "d")
    (ws / "d" / "g").write_text("in d\n")
    # the kernel now holds all these names (stat fills its cache)
    for name in ("a", "b", "c", "t", "d", "d/g"):
        os.stat(ws / name)
    run(sb, "rm -r a b c t d")
    assert not (ws / "a").exists()
    with pytest.raises(FileNotFoundError):
        open(ws / "b", "rb")
    # ">" (O_CREAT|O_TRUNC), ">>" (O_CREAT|O_APPEND), touch and mkdir of
    # the removed names all work at once
    assert sh(f"echo new > {ws}/a && echo app >> {ws}/b && touch {ws}/t").returncode == 0
    os.mkdir(ws / "d")
    assert sget(url, "a") == b"new\n"
    assert sget(url, "b") == b"app\n"
    assert sget(url, "t") == b""
    assert sbx.list_dir(url, "d").status == 200
    # a name inside a directory a command removed: ENOENT, nothing made
    run(sb, "rm -r d")
    p = sh(f"echo x > {ws}/d/g")
    assert p.returncode != 0 and "No such file or directory" in p.stderr
    assert sbx.list_dir(url, "d").status == 404
    # O_WRONLY without O_CREAT of a removed name stays ENOENT
    (ws / "c").write_text("c\n")
    os.stat(ws / "c")
    run(sb, "rm c")
    with pytest.raises(OSError) as e:
        os.open(ws / "c", os.O_WRONLY)
    assert e.value.errno == errno.ENOENT
    assert sget(url, "c") is None
    if kernel_has_epoch():
        # after each command the kernel looked every name up again before
        # using it (a name-cache epoch): no ESTALE retry at all
        assert kernel_epochs(m) >= 3
        assert stale_answers(m) == 0
    else:
        # names the kernel still held were found gone at their open
        # (ESTALE inside the kernel, which looked them up again), at most
        # once each
        assert kernel_epochs(m) == 0
        assert stale_answers(m) <= 6


def test_a_command_changes_are_seen_by_the_next_stat(cached):
    m, sb, url = cached
    ws = sb / "workspace"
    (ws / "f").write_text("abc")
    for k in range(5):
        assert os.stat(ws / "f").st_size in (3, 10 + k - 1)
        run(sb, f"printf 123456789{k}{'x' * k} > f")
        # right after the write returns: size and content are the command's
        assert os.stat(ws / "f").st_size == 10 + k
        assert (ws / "f").read_bytes() == f"123456789{k}{'x' * k}".encode()
    run(sb, "mkdir -p sub && printf hi > sub/n && rm f")
    assert sorted(os.listdir(ws)) == ["sub"]
    assert (ws / "sub" / "n").read_bytes() == b"hi"


def test_ls_l_of_a_large_directory_is_one_listing_and_no_lookups(cached_debug):
    m, sb, url = cached_debug
    n = 2000
    run(sb, f"mkdir big && cd big && seq -f 'n%05g' {n} | xargs touch && printf 12345 > n00007")
    assert (sb / "workspace" / "big").is_dir()  # the workspace's own listing
    lists0 = sbx.stats(url)["lists"]
    before = m.output().count("LOOKUP")
    xattrs = m.output().count("opcode: GETXATTR")
    p = sh(f"ls -l {sb}/workspace/big")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == n + 1  # "total" and one line per name
    assert any(" 5 " in line and line.endswith("n00007") for line in lines)
    lookups = m.output().count("LOOKUP") - before
    # READDIRPLUS gave the kernel every name with its attributes: ls -l
    # costs no lookup per name (it was one to twelve per name before)
    assert lookups < n // 20, lookups
    # the mount answers ENOTSUP for security labels and ACLs, and ls stops
    # asking for them after the first name (it was two per name)
    xattrs = m.output().count("opcode: GETXATTR") - xattrs
    assert xattrs < 10, xattrs
    assert sbx.stats(url)["lists"] - lists0 == 1
    # a second ls -l is served by the kernel's cache and the listing cache
    p = sh(f"ls -l {sb}/workspace/big | wc -l")
    assert p.stdout.strip() == str(n + 1)
    assert m.output().count("LOOKUP") - before < n // 20


def test_read_only_closes_and_ctl_writes_send_no_flush(cached_debug):
    m, sb, url = cached_debug
    ws = sb / "workspace"
    sbx.put(url, "r.txt", b"read me")
    assert (ws / "r.txt").read_bytes() == b"read me"
    before = m.output().count("opcode: FLUSH")
    for _ in range(3):
        assert (ws / "r.txt").read_bytes() == b"read me"
        run(sb, "true")
        assert (sb / "stdout").read_text() == ""
    assert m.output().count("opcode: FLUSH") == before
    # a descriptor that wrote still uploads at its close
    (ws / "w.txt").write_bytes(b"written")
    assert m.output().count("opcode: FLUSH") > before
    assert sget(url, "w.txt") == b"written"


def test_a_name_a_command_turned_into_another_type(cached_debug):
    m, sb, url = cached_debug
    ws = sb / "workspace"
    (ws / "f").write_text("file\n")
    os.mkdir(ws / "d")
    assert os.path.isfile(ws / "f") and os.path.isdir(ws / "d")
    run(sb, "rm f && mkdir f && rm -r d && printf y > d")
    # the kernel held f as a file and d as a directory: no EIO, the new types
    assert os.path.isdir(ws / "f")
    assert os.path.isfile(ws / "d")
    assert (ws / "d").read_bytes() == b"y"
    assert os.listdir(ws / "f") == []
    (ws / "f" / "in").write_text("in f\n")
    assert sget(url, "f/in") == b"in f\n"
    if kernel_has_epoch():
        assert kernel_epochs(m) >= 1
        assert stale_answers(m) == 0
    else:
        # f and d, held by the kernel as a file and a directory, answer
        # ESTALE once each for a stat and an open, so that the kernel looks
        # them up again
        assert stale_answers(m) <= 4


def stat_of(m, key):
    return m.stats()[key]


def test_a_command_that_changed_no_name_keeps_the_name_cache(cached):
    """Its whole change list has no directory: the kernel forgets the
    attributes and pages of the files it lists and keeps every name (a
    name-cache epoch is the whole mount's)."""
    m, sb, url = cached
    ws = sb / "workspace"
    run(sb, "printf aaaa > f && mkdir -p d && printf x > d/g")
    assert (ws / "f").read_bytes() == b"aaaa"  # in the kernel's page cache
    assert (ws / "d" / "g").read_bytes() == b"x"
    epochs, precise = stat_of(m, "kernel_epochs"), stat_of(m, "precise_invalidations")
    run(sb, "true")
    assert (stat_of(m, "kernel_epochs"), stat_of(m, "precise_invalidations")) == \
        (epochs, precise + 1)
    # same size, same second: the content and the mode are the command's
    run(sb, "printf bbbb > f && chmod 600 f && printf y > d/g")
    assert (ws / "f").read_bytes() == b"bbbb"
    assert os.stat(ws / "f").st_mode & 0o777 == 0o600
    assert (ws / "d" / "g").read_bytes() == b"y"
    run(sb, "touch -d @1500000000 f")
    assert os.stat(ws / "f").st_mtime == 1500000000
    assert stat_of(m, "kernel_epochs") == epochs
    assert stat_of(m, "precise_invalidations") == precise + 3
    # a name that goes: the names are forgotten (an epoch, where the
    # kernel has them), at once
    run(sb, "rm d/g")
    assert not (ws / "d" / "g").exists()
    assert stat_of(m, "precise_invalidations") == precise + 3
    if kernel_has_epoch():
        assert stat_of(m, "kernel_epochs") == epochs + 1
