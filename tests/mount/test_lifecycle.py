"""The root, .sandboxfs/ and sandbox lifecycle (DESIGN.md §1, §4)."""
import json
import os
import subprocess
import time

import pytest

from conftest import executed, sandbox_url
import mount
import sbx

sh = mount.sh


def test_root_layout(mnt, orch):
    assert os.listdir(mnt.mnt) == [".sandboxfs"]
    assert sorted(os.listdir(mnt.path(".sandboxfs"))) == ["ctl", "health", "pools", "stats", "version"]
    assert mount.read(mnt.path(".sandboxfs", "health")) == "ok\n"
    assert mount.read(mnt.path(".sandboxfs", "version")).startswith("sandboxfs ")
    stats = mount.read(mnt.path(".sandboxfs", "stats"))
    assert "requests_execute " in stats and "commands " in stats
    os.mkdir(mnt.path("box"))
    assert sorted(os.listdir(mnt.mnt)) == [".sandboxfs", "box"]
    assert sorted(os.listdir(mnt.path("box"))) == [
        "ctl", "cwd", "env", "exit", "info", "jobs", "last", "runs", "spawn", "state",
        "status", "stderr", "stdin", "stdout", "timeout", "workspace"]
    assert os.listdir(mnt.path("box", "jobs")) == []
    assert mount.read(mnt.path("box", "state")) == "ready\n"
    assert mount.read(mnt.path("box", "status")) == "idle\n"
    assert mount.read(mnt.path("box", "exit")) == ""
    assert mount.read(mnt.path("box", "timeout")) == "60\n"
    # the orchestrator has it, created once, with the id we chose
    ids = [s["id"] for s in orch.client().sandboxes().json()["sandboxes"]]
    assert ids == ["box"]


def test_mkdir_errors(mnt, orch):
    for bad in ("Upper", "under_score", "-lead", "a" * 64):
        p = sh(f"mkdir {mnt.mnt}/{bad}")
        assert p.returncode != 0 and "Invalid argument" in p.stderr, (bad, p.stderr)
    os.mkdir(mnt.path("twice"))
    p = sh(f"mkdir {mnt.mnt}/twice")
    assert p.returncode != 0 and "File exists" in p.stderr
    # live on the orchestrator but created elsewhere: also EEXIST
    assert orch.client().create(id="elsewhere", pool="default").status == 201
    p = sh(f"mkdir {mnt.mnt}/elsewhere")
    assert p.returncode != 0 and "File exists" in p.stderr
    assert "elsewhere" in os.listdir(mnt.mnt)  # the live ones are listed


def test_rmdir_owned_deletes_it(mnt, orch):
    os.mkdir(mnt.path("gone-soon"))
    sh(f"echo 'echo hi' > {mnt.mnt}/gone-soon/ctl", check=True)
    os.rmdir(mnt.path("gone-soon"))
    assert orch.client().sandbox("gone-soon").status == 404
    assert "gone-soon" not in os.listdir(mnt.mnt)
    # the id can be used again: a new sandbox
    os.mkdir(mnt.path("gone-soon"))
    assert orch.client().sandbox("gone-soon").status == 200


def test_rmdir_attached_only_detaches(tmp_path, mnt):
    with sbx.Server(tmp=None, faults=True) as other:
        mnt.secrets.append(other.url)
        ctl = mnt.path(".sandboxfs", "ctl")
        with open(ctl, "w") as f:
            f.write(f"attach mine {other.url}\n")
        assert "mine" in os.listdir(mnt.mnt)
        info = json.loads(mount.read(mnt.path("mine", "info")))
        assert info["attached"] is True and info["owned"] is False
        sh(f"echo 'echo attached' > {mnt.mnt}/mine/ctl", check=True)
        assert mount.read(mnt.path("mine", "stdout")) == "attached\n"
        os.rmdir(mnt.path("mine"))
        assert "mine" not in os.listdir(mnt.mnt)
        # still alive and untouched on its server
        c = other.client()
        assert c.healthz().status == 200
        assert c.execute("echo alive").json()["stdout"] == "alive\n"
        assert sbx.log(other.url) == ["echo attached", "echo alive"]


def test_attach_file_and_ctl_errors(tmp_path, orch):
    with sbx.Server(tmp=None) as a:
        lst = tmp_path / "list"
        lst.write_text(f"# attached sandboxes\nfile-one {a.url}\n")
        m = mount.Mount(tmp_path, server=orch, sandboxes=lst)
        m.secrets.append(a.url)
        with m:
            assert "file-one" in os.listdir(m.mnt)
            ctl = m.path(".sandboxfs", "ctl")
            for bad in ("attach", "attach x", f"attach Bad {a.url}", "attach y ftp://x",
                        "frobnicate", "create", "create ok pool=a image=b port=1",
                        "create ok image=b", "detach nope-not-here"):
                p = sh(f"echo '{bad}' > {ctl}")
                assert p.returncode != 0, bad
            p = sh(f"echo 'create made pool=default' > {ctl}")
            assert p.returncode == 0, p.stderr
            assert orch.client().sandbox("made").status == 200
            sh(f"echo 'detach file-one' > {ctl}", check=True)
            assert "file-one" not in os.listdir(m.mnt)
        m.check_log()


def cache_stats(m):
    lines = mount.read(m.path(".sandboxfs", "stats")).splitlines()
    s = dict(line.split(" ", 1) for line in lines)
    return {k: int(s[k]) for k in ("cache_files", "listing_entries")}


def test_vanished_sandbox_is_gone_never_recreated(mnt, orch):
    os.mkdir(mnt.path("fleeting"))
    ws = mnt.path("fleeting", "workspace")
    for i in range(3):
        (ws / f"f{i}").write_text("data\n")
    assert sorted(os.listdir(ws)) == ["f0", "f1", "f2"]
    assert cache_stats(mnt) == {"cache_files": 3, "listing_entries": 3}
    assert orch.client().delete_sandbox("fleeting").status == 204
    time.sleep(1.2)  # the listing cache
    assert "fleeting" in os.listdir(mnt.mnt)
    assert mount.read(mnt.path("fleeting", "state")) == "gone\n"
    # what the mount kept of its workspace is freed at once, not at unmount
    assert cache_stats(mnt) == {"cache_files": 0, "listing_entries": 0}
    p = sh(f"echo 'echo x' > {mnt.mnt}/fleeting/ctl")
    assert p.returncode != 0
    assert orch.client().sandbox("fleeting").status == 404  # not recreated
    os.rmdir(mnt.path("fleeting"))  # forgets it
    assert "fleeting" not in os.listdir(mnt.mnt)


def test_lost_create_is_reconciled_by_id(mnt, orch):
    c = orch.client()
    c.set_faults(lose_answer=True, routes="orchestrator")
    try:
        p = sh(f"mkdir {mnt.mnt}/lost-create", timeout=60)
        # the outcome is unknown: said so, and never created again
        assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
        assert mount.read(mnt.path("lost-create", "state")) == "unknown\n"
        assert "recover" in mount.read(mnt.path(".sandboxfs", "health"))
    finally:
        c.set_faults()
    sh(f"echo recover > {mnt.mnt}/.sandboxfs/ctl", check=True)
    assert mount.read(mnt.path("lost-create", "state")) == "ready\n"
    sbs = [s["id"] for s in c.sandboxes().json()["sandboxes"]]
    assert sbs == ["lost-create"]  # created once, not twice
    sh(f"echo 'echo ok' > {mnt.mnt}/lost-create/ctl", check=True)
    assert mount.read(mnt.path("lost-create", "stdout")) == "ok\n"
    mnt.allow = [r"answer lost"]


def test_unconfirmed_delete_and_recover(mnt, orch):
    os.mkdir(mnt.path("sticky"))
    c = orch.client()
    c.set_faults(drop_before=True, routes="orchestrator")
    try:
        p = sh(f"rmdir {mnt.mnt}/sticky")
    finally:
        c.set_faults()
    assert p.returncode != 0
    assert c.sandbox("sticky").status == 200
    assert mount.read(mnt.path("sticky", "state")) == "deleting\n"
    assert "unconfirmed delete" in mount.read(mnt.path(".sandboxfs", "health"))
    # a command is never sent to a sandbox being deleted
    assert sh(f"echo 'echo no' > {mnt.mnt}/sticky/ctl").returncode != 0
    sh(f"echo recover > {mnt.mnt}/.sandboxfs/ctl", check=True)
    assert c.sandbox("sticky").status == 404
    assert "sticky" not in os.listdir(mnt.mnt)
    assert mount.read(mnt.path(".sandboxfs", "health")) == "ok\n"
    mnt.allow = [r"answer lost", r"not sent", r"delete not confirmed"]


def test_workspace_sees_what_a_command_wrote(sandbox):
    ws = sandbox / "workspace"
    sh(f"echo 'echo first > f.txt' > {sandbox}/ctl", check=True)
    assert mount.read(ws / "f.txt") == "first\n"
    sh(f"echo 'echo second > f.txt; mkdir -p d; echo n > d/n' > {sandbox}/ctl", check=True)
    assert mount.read(ws / "f.txt") == "second\n"
    assert sorted(os.listdir(ws)) == ["d", "f.txt"]
    p = sh(f"cat {ws}/d/n; ls {ws}/d")
    assert p.stdout == "n\nn\n"
    # and the other way: a file written through the mount is seen by a command
    (ws / "in.txt").write_text("from the mount\n")
    sh(f"echo 'cat in.txt' > {sandbox}/ctl", check=True)
    assert mount.read(sandbox / "stdout") == "from the mount\n"
    # a mode the workspace batches reaches the sandbox before the next
    # command, through this same journaled command path
    (ws / "run.sh").write_text("echo script\n")
    sh(f"chmod +x {ws}/run.sh", check=True)
    sh(f"echo 'test -x run.sh && ./run.sh' > {sandbox}/ctl", check=True)
    assert mount.read(sandbox / "exit") == "0\n"
    assert mount.read(sandbox / "stdout") == "script\n"


def test_twenty_waiters_do_not_stall_the_mount(mnt):
    os.mkdir(mnt.path("busy"))
    os.mkdir(mnt.path("other"))
    sh(f"echo 'echo o > o.txt' > {mnt.mnt}/other/ctl", check=True)
    w = subprocess.Popen(["bash", "-c", f"echo 'sleep 4; echo done > d.txt' > {mnt.mnt}/busy/ctl"])
    try:
        assert sbx.wait_for(lambda: mount.read(mnt.path("busy", "status")) == "running\n")
        cats = [subprocess.Popen(["cat", str(mnt.path("busy", "exit"))], stdout=subprocess.PIPE,
                                 text=True) for _ in range(20)]
        time.sleep(0.5)
        assert all(c.poll() is None for c in cats)
        checks = [
            f"ls {mnt.mnt}", f"ls {mnt.mnt}/busy/workspace", f"cat {mnt.mnt}/busy/status",
            f"ls -l {mnt.mnt}/other/workspace", f"cat {mnt.mnt}/other/workspace/o.txt",
            f"cat {mnt.mnt}/other/stdout {mnt.mnt}/.sandboxfs/stats",
            f"echo 'echo quick' > {mnt.mnt}/other/ctl",
        ]
        for cmd in checks:
            t0 = time.monotonic()
            p = sh(cmd, timeout=10)
            assert p.returncode == 0, (cmd, p.stderr)
            assert time.monotonic() - t0 < 1.0, cmd
        assert mount.read(mnt.path("other", "stdout")) == "quick\n"
        outs = [c.communicate(timeout=15)[0] for c in cats]
        assert outs == ["0\n"] * 20
    finally:
        assert w.wait(30) == 0
    assert mount.read(mnt.path("busy", "workspace", "d.txt")) == "done\n"


def test_commands_in_different_sandboxes_run_in_parallel(mnt, orch):
    ids = [f"par{i}" for i in range(5)]
    for i in ids:
        os.mkdir(mnt.path(i))
    t0 = time.monotonic()
    procs = [subprocess.Popen(["bash", "-c", f"echo 'sleep 1.5; echo {i}' > {mnt.mnt}/{i}/ctl"])
             for i in ids]
    assert [p.wait(30) for p in procs] == [0] * 5
    assert time.monotonic() - t0 < 4  # not one after the other (7.5 s)
    for i in ids:
        assert mount.read(mnt.path(i, "stdout")) == f"{i}\n"
        assert executed(orch, i) == [f"sleep 1.5; echo {i}"]
