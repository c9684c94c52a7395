"""Journal first, restart and replay (DESIGN.md §5)."""
import json
import os
import re
import subprocess
import time

from conftest import executed, sandbox_url
import mount
import sbx

sh = mount.sh


def test_kill9_during_a_command_then_remount(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        os.mkdir(m.path("crash"))
        sh(f"echo 'echo before' > {m.mnt}/crash/ctl", check=True)
        sh(f"echo 'exit 2' > {m.mnt}/crash/ctl", check=True)
        w = subprocess.Popen(["bash", "-c", f"echo 'sleep 2; echo late > late.txt' > {m.mnt}/crash/ctl"],
                             stderr=subprocess.DEVNULL)
        assert sbx.wait_for(lambda: mount.read(m.path("crash", "status")) == "running\n")
        assert sbx.wait_for(lambda: len(executed(orch, "crash")) == 3)
        m.kill9()
        w.wait(10)
    finally:
        m.stop()
    time.sleep(2.5)  # the command finishes on the server meanwhile
    m2 = mount.Mount(tmp_path, server=orch).start()
    try:
        d = m2.path("crash")
        assert mount.read(d / "status") == "unknown\n"
        assert mount.read(d / "exit") == ""
        assert mount.read(d / "last") == "3\n"
        info = json.loads(mount.read(d / "info"))
        assert info["status"] == "unknown" and info["why"]
        assert sorted(os.listdir(d / "runs"), key=int) == ["1", "2", "3"]
        assert mount.read(d / "runs/1/stdout") == "before\n"
        assert mount.read(d / "runs/2/exit") == "2\n"
        assert mount.read(d / "runs/3/command") == "sleep 2; echo late > late.txt\n"
        assert mount.read(d / "runs/3/status") == "unknown\n"
        # the server saw it exactly once, and nothing was resent
        assert executed(orch, "crash") == ["echo before", "exit 2", "sleep 2; echo late > late.txt"]
        # it did run: its effect is there
        assert mount.read(d / "workspace" / "late.txt") == "late\n"
        # the next command gets the next number
        sh(f"echo 'echo after' > {d}/ctl", check=True)
        assert mount.read(d / "last") == "4\n"
    finally:
        m2.stop()
    m2.check_log()


def test_lost_answer_is_eio_and_never_resent(mnt, orch):
    os.mkdir(mnt.path("lossy"))
    url = sandbox_url(orch, "lossy")
    sbx.set_faults(url, lose_answer=True, routes="execute")
    try:
        p = sh(f"echo 'echo ran > ran.txt; echo out' > {mnt.mnt}/lossy/ctl")
    finally:
        sbx.set_faults(url)
    assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
    d = mnt.path("lossy")
    assert mount.read(d / "status") == "unknown\n"
    assert mount.read(d / "exit") == ""
    assert mount.read(d / "stdout") == ""
    assert "unknown" in json.loads(mount.read(d / "info"))["why"]
    time.sleep(0.5)
    assert executed(orch, "lossy") == ["echo ran > ran.txt; echo out"]
    assert sbx.stats(url)["executes"] == 1
    # the machinery is fine again for the next command
    sh(f"echo 'cat ran.txt' > {d}/ctl", check=True)
    assert mount.read(d / "stdout") == "ran\n"
    mnt.allow = [r"answer lost"]


def test_state_comes_back_after_a_clean_restart(tmp_path, orch):
    with sbx.Server(tmp=None) as att:
        lst = tmp_path / "list"
        m = mount.Mount(tmp_path, server=orch)
        m.secrets.append(att.url)
        with m:
            os.mkdir(m.path("keep"))
            sh(f"echo 7 > {m.mnt}/keep/timeout; echo 'echo kept; exit 9' > {m.mnt}/keep/ctl",
               check=True)
            with open(m.path(".sandboxfs", "ctl"), "w") as f:
                f.write(f"attach att {att.url}")
            sh(f"echo 'echo a' > {m.mnt}/att/ctl", check=True)
            big = "x" * 10000
            sh(f"echo 'head -c 10000 /dev/zero | tr \"\\\\0\" x' > {m.mnt}/keep/ctl", check=True)
        assert not lst.exists()
        m2 = mount.Mount(tmp_path, server=orch)
        m2.secrets.append(att.url)
        with m2:
            assert sorted(os.listdir(m2.mnt)) == [".sandboxfs", "att", "keep"]
            k = m2.path("keep")
            assert mount.read(k / "timeout") == "7\n"
            assert mount.read(k / "runs/1/stdout") == "kept\n"
            assert mount.read(k / "runs/1/exit") == "9\n"
            assert mount.read(k / "stdout") == big  # stored in a file, crc32 checked
            assert mount.read(k / "last") == "2\n"
            assert mount.read(m2.path("att", "stdout")) == "a\n"
            assert json.loads(mount.read(m2.path("att", "info")))["attached"] is True
        m2.check_log()
        # the journal reads in plain text, without the URL
        p = subprocess.run([str(mount.sandboxfs_binary()), "--dump-journal", str(m.state)],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 0, p.stderr
        assert "EXEC_RESULT" in p.stdout.upper() or "exec" in p.stdout.lower()
        assert att.url not in p.stdout
        assert orch.token not in p.stdout


def test_state_dir_modes(tmp_path, mnt):
    st = os.stat(mnt.state)
    assert st.st_mode & 0o777 == 0o700
    assert os.stat(mnt.state / "journal").st_mode & 0o777 == 0o600


def test_journal_damage_stops_the_mount(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    with m:
        os.mkdir(m.path("d1"))
        for i in range(3):
            sh(f"echo 'echo {i}' > {m.mnt}/d1/ctl", check=True)
    j = m.state / "journal"
    data = bytearray(j.read_bytes())
    data[len(data) // 2] ^= 0xFF
    j.write_bytes(bytes(data))
    rc, out = mount.Mount(tmp_path, server=orch).run_daemon()
    assert rc != 0
    assert "journal" in out and str(j) in out and re.search(r"(byte|offset) \d+", out), out
    assert len(out.strip().splitlines()) == 1, out
    assert "repair_journal" in out and "--dump-journal" in out, out  # says what to do
    # repair cuts it and mounts, keeping the cut part aside
    m3 = mount.Mount(tmp_path, server=orch, opts=["repair_journal"])
    with m3:
        assert "d1" in os.listdir(m3.mnt)
        assert "repaired" in mount.read(m3.path(".sandboxfs", "health"))
    m3.check_log(allow=[r"repaired", r"damaged"])


def test_sigterm_unmounts_cleanly(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch).start()
    os.mkdir(m.path("t"))
    rc, gone = m.terminate()
    assert rc == 0 and gone
    m.check_log()


def test_lost_create_is_reconciled_at_the_next_mount(tmp_path, orch):
    c = orch.client()
    m = mount.Mount(tmp_path, server=orch)
    with m:
        c.set_faults(lose_answer=True, routes="orchestrator")
        try:
            p = sh(f"mkdir {m.mnt}/maybe", timeout=60)
            assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
        finally:
            c.set_faults()
    m.check_log(allow=[r"answer lost"])
    m2 = mount.Mount(tmp_path, server=orch)
    with m2:
        assert mount.read(m2.path("maybe", "state")) == "ready\n"
        assert mount.read(m2.path(".sandboxfs", "health")) == "ok\n"
        assert [s["id"] for s in c.sandboxes().json()["sandboxes"]] == ["maybe"]
    m2.check_log()


def test_orchestrator_down_is_enotconn_and_said_in_health(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    with m:
        orch.stop()
        try:
            time.sleep(1.1)
            p = sh(f"mkdir {m.mnt}/later")
            assert p.returncode != 0 and "not connected" in p.stderr.lower(), p.stderr
            assert "orchestrator unreachable" in mount.read(m.path(".sandboxfs", "health"))
        finally:
            orch.restart(same_port=True)
        time.sleep(1.1)
        os.mkdir(m.path("later"))
        assert mount.read(m.path(".sandboxfs", "health")) == "ok\n"
    m.check_log(allow=[r"not sent"])
