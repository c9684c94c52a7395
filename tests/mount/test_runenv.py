"""ID/env, ID/cwd and ID/stdin: what later commands run with (DESIGN.md §2).

Checked through the mount and on the server side: what /execute received
(the contract has no env, cwd or stdin, so a command is sent wrapped) and
the files the commands made in the workspace.
"""
import errno
import json
import os
import subprocess

import pytest

from conftest import executed, sandbox_url
import mount
import sbx

sh = mount.sh


def ctl(d, command):
    p = sh(f"echo {quote(command)} > {d}/ctl")
    assert p.returncode == 0, p.stderr
    return mount.read(d / "stdout")


def quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def test_env_and_cwd_apply_to_later_commands_and_survive_a_remount(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        os.mkdir(m.path("ec"))
        d = m.path("ec")
        url = sandbox_url(orch, "ec")
        m.secrets.append(url)
        assert os.stat(d / "env").st_mode & 0o777 == 0o600
        assert os.stat(d / "cwd").st_mode & 0o777 == 0o644
        sh(f"printf 'GREETING=hello world\\nTOKEN=t0p-s3cret\\n' > {d}/env", check=True)
        assert mount.read(d / "env") == "GREETING=hello world\nTOKEN=t0p-s3cret\n"
        ctl(d, "mkdir -p src/app")
        sh(f"echo src/app > {d}/cwd", check=True)
        assert mount.read(d / "cwd") == "src/app\n"
        out = ctl(d, 'echo "$GREETING"; pwd; echo made > here.txt; exit 3')
        assert out.splitlines()[0] == "hello world"
        assert out.splitlines()[1].endswith("/src/app")
        assert mount.read(d / "exit") == "3\n"  # the user's exit code, through eval
        assert sbx.get(url, "src/app/here.txt").body == b"made\n"
        # the run keeps the user's own text; the server got it wrapped
        assert mount.read(d / "runs" / "2" / "command") == \
            'echo "$GREETING"; pwd; echo made > here.txt; exit 3\n'
        sent = sbx.log(url, raw=True)[-1]
        sent = sent if isinstance(sent, str) else sent["command"]
        assert "cd -- 'src/app'" in sent and "eval " in sent
        assert "export 'TOKEN=t0p-s3cret'" in sent
        # values never in info, the log, or the journal's dump
        assert "t0p-s3cret" not in mount.read(d / "info")
        dump = sh(f"{mount.sandboxfs_binary()} --dump-journal {m.state}", check=True).stdout
        assert "t0p-s3cret" not in dump and "hello world" not in dump
        assert "GREETING,TOKEN (values not shown)" in dump
        m.secrets.append("t0p-s3cret")
    finally:
        m.stop()
    m.check_log()
    m2 = mount.Mount(tmp_path, server=orch).start()
    try:
        d = m2.path("ec")
        assert mount.read(d / "env") == "GREETING=hello world\nTOKEN=t0p-s3cret\n"
        assert mount.read(d / "cwd") == "src/app\n"
        assert ctl(d, 'echo "$TOKEN" in "$(basename "$PWD")"') == "t0p-s3cret in app\n"
        # emptied, they stop applying: the root and the sandbox's own env
        sh(f": > {d}/cwd && : > {d}/env", check=True)
        assert mount.read(d / "cwd") == "" and mount.read(d / "env") == ""
        assert ctl(d, 'echo "[$TOKEN]"; ls -d src') == "[]\nsrc\n"
        sent = sbx.log(url, raw=True)[-1]
        sent = sent if isinstance(sent, str) else sent["command"]
        assert "cd -- " not in sent and "export " not in sent  # nothing set
    finally:
        m2.stop()


def test_bad_env_and_cwd_are_refused_and_change_nothing(sandbox, orch):
    d = sandbox
    sh(f"echo A=1 > {d}/env", check=True)
    for bad in ("no equals sign", "1A=x", "A B=x"):
        p = sh(f"echo {quote(bad)} > {d}/env")
        assert p.returncode != 0 and "Invalid argument" in p.stderr, bad
    for bad in ("../up", "/abs", "a/../../b"):
        p = sh(f"echo {quote(bad)} > {d}/cwd")
        assert p.returncode != 0 and "Invalid argument" in p.stderr, bad
    # the shell's ">" emptied env before the refused write: it is empty,
    # never half-set
    assert mount.read(d / "env") == ""
    assert mount.read(d / "cwd") == ""
    # a cwd that does not exist: the command does not run there, exit 125
    sh(f"echo nowhere > {d}/cwd", check=True)
    p = sh(f"echo 'echo ran > ran.txt' > {d}/ctl")
    assert p.returncode == 0
    assert mount.read(d / "exit") == "125\n"
    assert "nowhere" in mount.read(d / "stderr")
    assert not (d / "workspace" / "ran.txt").exists()


def test_stdin_feeds_the_next_command_only(sandbox, orch):
    d = sandbox
    url = sandbox_url(orch, "sbx1")
    assert os.stat(d / "stdin").st_mode & 0o777 == 0o600
    sh(f"printf 'b\\na\\n' > {d}/stdin", check=True)
    assert os.stat(d / "stdin").st_size == 4
    assert mount.read(d / "stdin") == "b\na\n"
    assert ctl(d, "sort") == "a\nb\n"
    # one write, one command: it is empty again, and the next reads nothing
    assert mount.read(d / "stdin") == ""
    assert ctl(d, "cat; echo end") == "end\n"
    # larger than one write, binary, appended with >>
    blob = bytes(range(256)) * 2048  # 512 KiB
    (d / "stdin").write_bytes(blob)
    sh(f"printf tail >> {d}/stdin", check=True)
    ctl(d, "cat > got.bin; wc -c < got.bin")
    assert mount.read(d / "stdout").strip() == str(len(blob) + 4)
    assert sbx.get(url, "got.bin").body == blob + b"tail"
    # the upload under way is never shown in the workspace
    assert not [n for n in os.listdir(d / "workspace") if n.startswith(".sandboxfs-")]
    assert not [e["name"] for e in sbx.list_dir(url, "").json()["entries"]
                if e["name"].startswith(".sandboxfs-stdin")]
