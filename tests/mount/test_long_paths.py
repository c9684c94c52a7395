"""Paths as long as the kernel allows work: 255 bytes a name, 4,095 bytes a
path (relative to the workspace: a program reaches it from a directory
descriptor). Files and directories at such depths are made, read, renamed
and removed through the mount; the server's copies are checked through the
contract.
"""
import os

from conftest import sandbox_url
import mount
import sbx

PATH_MAX = 4095


def test_paths_of_4095_bytes_with_250_byte_names(sandbox, orch):
    ws = sandbox / "workspace"
    url = sandbox_url(orch, "sbx1")
    dfd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    rel = b""
    try:
        # 15 directories of 250-byte names (3,765 bytes with the slashes).
        for i in range(15):
            name = bytes([ord("a") + i]) * 250
            os.mkdir(name, dir_fd=dfd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
            rel += name + b"/"
        # A file whose path is 4,000 bytes, written and read back.
        fname = b"f" * (4000 - len(rel))
        fd = os.open(fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
        os.write(fd, b"deep\n")
        os.close(fd)
        r = sbx.get(url, (rel + fname).decode())
        assert r.status == 200 and r.body == b"deep\n"
        # One more level: paths of 4,095 bytes inside it for a directory
        # (mkdir sends a name inside it too) and a file renamed there.
        last = b"p" * 250
        os.mkdir(last, dir_fd=dfd)
        pfd = dfd
        dfd = os.open(last, os.O_RDONLY | os.O_DIRECTORY, dir_fd=pfd)
        prel = rel
        rel += last + b"/"
        dname = b"D" * (PATH_MAX - len(rel))
        assert len(rel + dname) == PATH_MAX
        os.mkdir(dname, dir_fd=dfd)
        names = [e["name"] for e in sbx.list_dir(url, rel[:-1].decode()).json()["entries"]]
        assert names == [dname.decode()]
        assert sbx.list_dir(url, (rel + dname).decode()).json()["entries"] == []
        longest = b"g" * (PATH_MAX - len(rel))
        os.rename(fname, longest, src_dir_fd=pfd, dst_dir_fd=dfd)
        os.close(pfd)
        assert sbx.get(url, (rel + longest).decode()).body == b"deep\n"
        assert sbx.get(url, (prel + fname).decode()).status == 404
        # After a command (caches revalidated), read again at that depth.
        # One write of the command (a shell's echo would cut it in 4 KiB).
        fd = os.open(sandbox / "ctl", os.O_WRONLY)
        try:
            cmd = b"echo again >> '" + rel + longest + b"'\n"
            assert os.write(fd, cmd) == len(cmd)
        finally:
            os.close(fd)
        assert mount.read(sandbox / "exit") == "0\n"
        fd = os.open(longest, os.O_RDONLY, dir_fd=dfd)
        try:
            assert os.read(fd, 100) == b"deep\nagain\n"
        finally:
            os.close(fd)
        assert os.stat(longest, dir_fd=dfd).st_size == 11
        assert sorted(os.listdir(dfd)) == sorted([dname.decode(), longest.decode()])
        os.rmdir(dname, dir_fd=dfd)
        os.unlink(longest, dir_fd=dfd)
        assert sbx.list_dir(url, rel[:-1].decode()).json()["entries"] == []
    finally:
        os.close(dfd)
    # Longer than the kernel's limit stays refused.
    too_long = os.fsencode(ws) + b"/" + b"x" * 256
    try:
        os.stat(too_long)
        raise AssertionError("a 256-byte name was accepted")
    except OSError as e:
        assert e.errno == 36  # ENAMETOOLONG
