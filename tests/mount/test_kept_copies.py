"""What a mount downloaded outlives a command that did not change it
(vfs/workspace.c, workspace_invalidate_changed): after a command whose
whole change list names no directory, only the files listed are fetched
again. Whatever changed a file between two reads through the mount, a
command there, another client's PUT, another mount's command, the next
read is the new content. Counted on the server: its GETs."""
import os

import pytest

from conftest import sandbox_url
import mount
import sbx

sh = mount.sh

MIB = 1 << 20


def run(sandbox, command):
    q = "'" + command.replace("'", "'\\''") + "'"
    p = sh(f"echo {q} > {sandbox}/ctl")
    assert p.returncode == 0, p.stderr
    assert mount.read(sandbox / "exit") == "0\n"


def gets(url):
    return sbx.stats(url)["gets"]


@pytest.fixture
def sb(mnt, orch):
    os.mkdir(mnt.path("kc"))
    url = sandbox_url(orch, "kc")
    mnt.secrets.append(url)
    run(mnt.path("kc"), "true")  # the first command lists everything
    return mnt, mnt.path("kc"), url


def cached_file(m, d, url, name, data):
    """name on the server with data, read once through the mount, after the
    command that lists its making."""
    assert sbx.put(url, name, data).status == 204
    run(d, "true")
    assert (d / "workspace" / name).read_bytes() == data


def test_a_quiet_command_keeps_what_was_read(sb):
    m, d, url = sb
    data = os.urandom(MIB)
    cached_file(m, d, url, "big.bin", data)
    kept, precise = m.stats()["copies_kept_after_commands"], m.stats()["precise_invalidations"]
    before = gets(url)
    for _ in range(3):
        run(d, "true")
        assert (d / "workspace" / "big.bin").read_bytes() == data
    assert gets(url) == before  # no download again
    assert m.stats()["precise_invalidations"] == precise + 3
    assert m.stats()["copies_kept_after_commands"] >= kept + 3


def test_a_file_a_command_rewrote_is_read_anew(sb):
    m, d, url = sb
    cached_file(m, d, url, "f.txt", b"first\n")
    cached_file(m, d, url, "other.txt", b"stays\n")
    before = gets(url)
    # same size, same second: only the change list tells
    run(d, "printf 'secnd\\n' > f.txt")
    assert (d / "workspace" / "f.txt").read_bytes() == b"secnd\n"
    assert (d / "workspace" / "other.txt").read_bytes() == b"stays\n"
    assert gets(url) == before + 1  # f.txt only


def test_another_clients_put_between_commands_is_read_anew(sb):
    m, d, url = sb
    cached_file(m, d, url, "f.txt", b"first\n")
    # right after the command's end: the change list's marks take turns,
    # and the clock has moved past the new one before the wrapper ended
    assert sbx.put(url, "f.txt", b"other\n").status == 204
    run(d, "true")
    assert (d / "workspace" / "f.txt").read_bytes() == b"other\n"


def test_an_unsure_mark_makes_the_next_list_not_whole(sb):
    """A mark the wrapper could not see the clock pass says "u" (mount/
    stream.c): the list after it is not whole, and everything is fetched
    again."""
    m, d, url = sb
    data = b"cached\n"
    cached_file(m, d, url, "f.txt", data)
    root = [e["name"] for e in sbx.list_dir(url, "").json()["entries"]]
    marks = [n for n in root if n.startswith(".sandboxfs-mark.")]
    assert len(marks) == 2, root
    for name in marks:
        assert sbx.put(url, name, b"u\n").status == 204
    precise, before = m.stats()["precise_invalidations"], gets(url)
    run(d, "true")
    assert (d / "workspace" / "f.txt").read_bytes() == data
    assert m.stats()["precise_invalidations"] == precise
    assert gets(url) == before + 1
    # the next turn is sure again
    run(d, "true")
    assert (d / "workspace" / "f.txt").read_bytes() == data
    assert m.stats()["precise_invalidations"] == precise + 1
    assert gets(url) == before + 1


def test_another_mounts_command_is_listed_to_this_one(tmp_path):
    """Two mounts of one sandbox keep marks of their own: what the other's
    command changed is in this one's next list."""
    with sbx.Server(tmp=None, faults=True) as srv:
        mounts = []
        try:
            for name in ("a", "b"):
                (tmp_path / name).mkdir()
                m = mount.Mount(tmp_path / name)
                m.secrets.append(srv.url)
                m.start()
                mounts.append(m)
                with open(m.path(".sandboxfs", "ctl"), "w") as f:
                    f.write(f"attach two {srv.url}\n")
            a, b = (m.path("two") for m in mounts)
            run(a, "true")
            run(b, "true")
            run(a, "printf 'one\\n' > f.txt")
            assert (a / "workspace" / "f.txt").read_bytes() == b"one\n"
            run(a, "true")
            run(b, "printf 'two\\n' > f.txt")
            before = gets(srv.url)
            run(a, "true")
            assert (a / "workspace" / "f.txt").read_bytes() == b"two\n"
            assert gets(srv.url) == before + 1
            root = [e["name"] for e in sbx.list_dir(srv.url, "").json()["entries"]]
            assert len([n for n in root if n.startswith(".sandboxfs-mark.")]) == 4, root
        finally:
            for m in mounts:
                m.stop()
        for m in mounts:
            m.check_log()
