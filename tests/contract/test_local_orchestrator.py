"""Properties of the local orchestrator beyond the wire contract: restart,
files on disk, secrets, and /_admin/ on its sandboxes."""
import http.client
import json
import stat
import subprocess

import pytest

import sbx


def make(orch_server, sid, **fields):
    c = orch_server.client()
    r = c.create(pool="default", id=sid, **fields)
    assert r.status == 201, r
    return r.json()


def test_sandboxes_survive_a_restart_with_the_same_id_port_and_url(local_orchestrator):
    s = local_orchestrator
    st = make(s, "keep-me")
    box = sbx.Client(st["url"])
    assert box.put("notes/a.txt", b"persisted").status == 204
    old_port = s.port
    s.restart()
    c = s.client()
    again = c.sandbox("keep-me").json()
    assert again["url"] == st["url"] and again["status"] == "ready"
    assert [b["id"] for b in c.sandboxes().json()["sandboxes"]] == ["keep-me"]
    assert box.get("notes/a.txt").body == b"persisted"
    assert box.execute("cat notes/a.txt").json()["stdout"] == "persisted"
    assert isinstance(old_port, int)


def test_workspace_and_metadata_live_under_the_root_privately(local_orchestrator):
    s = local_orchestrator
    st = make(s, "on-disk", environment={"GREETING": "hi"})
    sbx.Client(st["url"]).put("x.txt", b"x")
    assert (s.root / "on-disk" / "workspace" / "x.txt").read_bytes() == b"x"
    meta = s.root / "on-disk" / "sandbox.json"
    assert stat.S_IMODE(meta.stat().st_mode) == 0o600
    assert stat.S_IMODE(s.root.stat().st_mode) == 0o700
    assert json.loads(meta.read_text())["id"] == "on-disk"


def test_deleting_removes_the_workspace(local_orchestrator):
    s = local_orchestrator
    make(s, "to-delete")
    assert (s.root / "to-delete").exists()
    assert s.client().delete_sandbox("to-delete").status == 204
    assert not (s.root / "to-delete").exists()


def test_delete_kills_a_running_command(local_orchestrator):
    import threading
    import time
    s = local_orchestrator
    st = make(s, "busy")
    box = sbx.Client(st["url"], timeout=30)
    outcome = {}

    def run():
        try:
            outcome["r"] = box.execute("sleep 600", timeout_seconds=0)
        except Exception as e:  # the connection may be closed instead
            outcome["e"] = e
    t = threading.Thread(target=run)
    t.start()
    assert sbx.wait_for(lambda: "sleep 600" in box.log(), timeout=5)
    t0 = time.monotonic()
    assert s.client().delete_sandbox("busy").status == 204
    t.join(20)
    assert not t.is_alive() and time.monotonic() - t0 < 10
    assert "e" in outcome or outcome["r"].json()["exitCode"] != 0


def test_environment_is_given_to_commands(local_orchestrator):
    st = make(local_orchestrator, "envy", environment={"GREETING": "hello there"})
    r = sbx.Client(st["url"]).execute('echo "$GREETING"')
    assert r.json()["stdout"] == "hello there\n"


def test_image_create_is_served_as_a_directory_and_records_the_image(local_orchestrator):
    c = local_orchestrator.client()
    r = c.create(image="example/img:1", port=8080, id="imaged", cpu=2, memory=1024)
    assert r.status == 201
    st = r.json()
    assert st["image"] == "example/img:1" and st["cpu"] == 2 and st["memory"] == 1024
    assert "poolId" not in st and "error" not in st
    assert list(st["urls"]) == ["8080"]
    assert sbx.Client(st["url"]).healthz().status == 200


def test_the_token_is_never_printed(local_orchestrator):
    s = local_orchestrator
    c = s.client()
    make(s, "quiet")
    sbx.Client(s.url, token="wrong").sandboxes()
    c.delete_sandbox("quiet")
    s.stop()
    assert s.token not in s.output()


def test_unreadable_token_file_is_refused_without_printing_it(tmp_path):
    r = subprocess.run([str(sbx.server_binary()), "--orchestrator", "--root",
                        str(tmp_path / "r"), "--token-file", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "token" in r.stderr


def test_a_second_orchestrator_on_the_same_root_is_refused(local_orchestrator):
    r = subprocess.run([str(sbx.server_binary()), "--orchestrator", "--root",
                        str(local_orchestrator.root), "--port", "0"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "another orchestrator" in r.stderr


def test_pools_come_from_the_pool_flags_and_a_full_pool_is_429(tmp_path):
    with sbx.Server(orchestrator=True, pools=["small:2", "large"], tmp=tmp_path) as s:
        c = s.client()
        assert sorted(p["id"] for p in c.pools().json()["pools"]) == ["large", "small"]
        assert c.create(pool="default").status == 404
        r = c.create(pool="small")
        assert r.status == 201 and r.json()["id"].startswith("small-")
        assert c.pool("small").json() == {"id": "small", "image": "local", "size": 2,
                                          "warm": 1, "claimed": 1}
        assert c.create(pool="small", id="second").status == 201
        r = c.create(pool="small", id="third")
        assert r.status == 429 and r.json()["error"]
        assert c.create(pool="large", id="third").status == 201
        c.delete_sandbox("second")
        assert c.create(pool="small", id="fourth").status == 201


def test_orchestrator_faults_apply_to_its_sandboxes_too(local_orchestrator):
    s = local_orchestrator
    c = s.client()
    box = sbx.Client(make(s, "faulty")["url"])
    c.set_faults(lose_answer=True, routes="execute")
    assert box.faults()["lose_answer"] is True
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        box.execute("echo lost")
    assert box.log() == ["echo lost"]
    c.set_faults(lose_answer=True, routes="orchestrator")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        c.create(pool="default", id="lost-create")
    c.set_faults()
    # The create happened although its answer was lost: read it by id.
    assert c.sandbox("lost-create").status == 200
    assert box.execute("echo ok").json()["stdout"] == "ok\n"


def test_a_sandbox_whose_port_is_taken_at_restart_fails_then_recovers(local_orchestrator):
    import socket
    s = local_orchestrator
    st = make(s, "port-taken")
    port = int(st["url"].rsplit(":", 1)[1])
    s.stop()
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", port))
    blocker.listen()
    try:
        s.start()
        st2 = s.client().sandbox("port-taken").json()
        assert st2["status"] == "failed" and st2["error"] and "url" not in st2
    finally:
        blocker.close()
    s.restart()
    st3 = s.client().sandbox("port-taken").json()
    assert st3["status"] == "ready" and st3["url"] == st["url"]


def test_machinery_flag_puts_the_agent_files_in_new_workspaces(tmp_path):
    with sbx.Server(orchestrator=True, args=["--machinery"], tmp=tmp_path) as s:
        st = s.client().create(pool="default", id="mach").json()
        entries = {e["name"]: e for e in sbx.Client(st["url"]).list("").json()["entries"]}
        assert set(entries) >= {".pool", ".sandbox-agent", ".pool-exec.fifo", ".pool-shim.log"}
        assert entries[".pool"]["isDir"] is True
