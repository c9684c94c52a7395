"""Properties of the local sandbox-server beyond the wire contract: its
process tree handling, memory bound on streamed files, configuration, and
the /_admin/ test switches. Always runs against a local server."""
import hashlib
import http.client
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import sbx

MIB = 1 << 20


def pid_alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_timed_out_command_grandchild_process_is_gone(local_server):
    c = local_server.client()
    r = c.execute("sh -c 'sleep 300 & echo $! > pid; wait'", timeout_seconds=1)
    assert r.status == 200 and r.json()["exitCode"] == 124
    pid = int((local_server.workspace / "pid").read_text())
    assert sbx.wait_for(lambda: not pid_alive(pid), timeout=5), f"grandchild {pid} survived"


def test_timed_out_command_descendant_in_a_new_session_is_gone(local_server):
    # setsid leaves the process group; the server still kills descendants.
    c = local_server.client()
    r = c.execute("setsid sh -c 'echo $$ > pid; exec sleep 300' & wait", timeout_seconds=1)
    assert r.json()["exitCode"] == 124
    pid = int((local_server.workspace / "pid").read_text())
    assert sbx.wait_for(lambda: not pid_alive(pid), timeout=5), f"descendant {pid} survived"


def test_background_process_after_exit_does_not_hold_the_answer(local_server):
    c = local_server.client()
    t0 = time.monotonic()
    r = c.execute("sleep 5 & echo started", timeout_seconds=30)
    assert r.json() == {**r.json(), "exitCode": 0, "stdout": "started\n"}
    assert time.monotonic() - t0 < 3


def test_1_gib_file_round_trip_keeps_resident_memory_under_64_mib(local_server):
    size = 1 << 30
    block = os.urandom(MIB)

    def chunks():
        for i in range(size // MIB):
            yield i.to_bytes(8, "little") + block[8:]

    want = hashlib.sha256()
    for ch in chunks():
        want.update(ch)
    c = local_server.client(timeout=300)
    r = c.put_stream("big/one-gib.bin", chunks(), size)
    assert r.status == 204
    assert (local_server.workspace / "big/one-gib.bin").stat().st_size == size
    got = hashlib.sha256()
    stream = c.get_stream("big/one-gib.bin")
    assert next(stream) == 200
    n = 0
    for b in stream:
        got.update(b)
        n += len(b)
    assert n == size
    assert got.hexdigest() == want.hexdigest()
    hwm = local_server.vm_hwm_kib()
    assert hwm < 64 * 1024, f"VmHWM {hwm} KiB"


def test_interrupted_put_leaves_the_old_file(local_server):
    c = local_server.client()
    assert c.put("keep.txt", b"old content").status == 204
    s = socket.create_connection(("127.0.0.1", local_server.port))
    s.sendall(b"PUT /files/keep.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
              + b"new" * 10)
    time.sleep(0.2)
    s.close()
    time.sleep(0.3)
    assert c.get("keep.txt").body == b"old content"
    leftovers = [p.name for p in local_server.workspace.iterdir() if p.name != "keep.txt"]
    assert leftovers == []


def test_put_keeps_the_mode_of_the_file_it_replaces(local_server):
    c = local_server.client()
    c.put("run.sh", b"echo one\n")
    os.chmod(local_server.workspace / "run.sh", 0o755)
    c.put("run.sh", b"echo two\n")
    assert (local_server.workspace / "run.sh").stat().st_mode & 0o777 == 0o755


def test_configured_by_sandbox_workspace_port_and_shell(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = tmp_path / "ws"
    shell = tmp_path / "myshell"
    shell.write_text("#!/bin/sh\necho via-myshell\nexec /bin/sh \"$@\"\n")
    shell.chmod(0o755)
    env = dict(os.environ, SANDBOX_WORKSPACE=str(ws), SANDBOX_PORT=str(port),
               SANDBOX_SHELL=str(shell))
    proc = subprocess.Popen([str(sbx.server_binary())], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = sbx.Client(f"http://127.0.0.1:{port}", timeout=10)

        def up():
            try:
                return c.healthz().status == 200
            except OSError:
                return False
        assert sbx.wait_for(up, timeout=10)
        r = c.execute("pwd")
        assert r.json()["stdout"] == f"via-myshell\n{ws}\n"
    finally:
        proc.terminate()
        proc.wait(10)


def test_listens_on_127_0_0_1_only(local_server):
    port_hex = f"{local_server.port:04X}"
    local = [line.split()[1] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
             if line.split()[1].endswith(":" + port_hex) and line.split()[3] == "0A"]
    assert local == ["0100007F:" + port_hex]


def test_help_documents_every_flag():
    out = subprocess.run([str(sbx.server_binary()), "--help"], capture_output=True,
                         text=True, check=True).stdout
    for flag in ("--listen", "--port", "--port-file", "--workspace", "--shell", "--faults",
                 "--fault", "--orchestrator", "--root", "--token-file", "--pool", "--help",
                 "--unix", "--url-file", "http+unix://",
                 "SANDBOX_WORKSPACE", "SANDBOX_PORT", "SANDBOX_SHELL"):
        assert flag in out, flag


def test_keep_alive_reuses_one_connection(local_server):
    admin = local_server.client()
    before = admin.stats()["connections"]
    c = local_server.client(keep_alive=True)
    for i in range(5):
        assert c.put(f"k{i}", b"x").status == 204
        assert c.get(f"k{i}").status == 200
    c.execute("true")
    c.close()
    after = admin.stats()["connections"]
    assert after - before == 2  # the keep-alive client's and the stats call's


def test_a_long_execute_does_not_block_file_calls(local_server):
    c = local_server.client()
    t = threading.Thread(target=lambda: c.execute("sleep 2"))
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    assert c.put("during.txt", b"x").status == 204
    assert c.get("during.txt").status == 200
    assert c.list("").status == 200
    assert time.monotonic() - t0 < 1
    t.join()


def test_admin_routes_exist_only_with_faults(tmp_path):
    with sbx.Server(tmp=tmp_path) as s:
        assert s.client().request("GET", "/_admin/stats").status == 404


def test_admin_stats_count_requests_by_kind(local_server):
    c = local_server.client()
    before = c.stats()
    c.put("s.txt", b"1")
    c.get("s.txt")
    c.list("")
    c.delete("s.txt")
    c.execute("true")
    after = c.stats()
    for k in ("puts", "gets", "lists", "deletes", "executes", "commands"):
        assert after[k] == before[k] + 1, k
    assert after["requests"] == before["requests"] + 5


def test_admin_log_lists_commands_including_lost_answers(local_server):
    c = local_server.client()
    c.execute("echo one")
    c.set_faults(lose_answer=True, routes="execute")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        c.execute("echo two > two.txt")
    c.set_faults()
    assert c.log()[-2:] == ["echo one", "echo two > two.txt"]
    assert (local_server.workspace / "two.txt").read_text() == "two\n"


def test_fault_drop_before_closes_without_running(local_server):
    c = local_server.client()
    c.set_faults(drop_before=True)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        c.execute("touch ran.txt")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        c.put("dropped.txt", b"x")
    c.set_faults()
    assert not (local_server.workspace / "ran.txt").exists()
    assert not (local_server.workspace / "dropped.txt").exists()
    assert "touch ran.txt" not in c.log()


def test_fault_error_rate_answers_500_without_doing_the_work(local_server):
    c = local_server.client()
    c.set_faults(error_rate=1.0, routes="files")
    r = c.put("e.txt", b"x")
    assert r.status == 500 and "error" in r.json()
    assert not (local_server.workspace / "e.txt").exists()
    assert c.execute("echo fine").json()["stdout"] == "fine\n"  # routes=files only
    c.set_faults(error_rate=0.5)
    codes = [c.healthz().status for _ in range(200)]
    assert 40 < codes.count(500) < 160 and codes.count(200) + codes.count(500) == 200


def test_fault_delay_ms_delays_every_answer(local_server):
    c = local_server.client()
    c.set_faults(delay_ms=400)
    t0 = time.monotonic()
    assert c.healthz().status == 200
    assert time.monotonic() - t0 >= 0.4
    c.set_faults()
    t0 = time.monotonic()
    c.healthz()
    assert time.monotonic() - t0 < 0.3


def test_fault_body_rate_kbps_slows_file_bodies_only(local_server):
    c = local_server.client()
    data = os.urandom(256 * 1024)
    c.put("r.bin", data)
    c.set_faults(body_rate_kbps=512)  # 256 KiB at 512 KiB/s: 0.5 s
    assert c.faults()["body_rate_kbps"] == 512
    t0 = time.monotonic()
    assert c.get("r.bin").body == data
    assert time.monotonic() - t0 >= 0.4
    t0 = time.monotonic()
    assert c.healthz().status == 200
    assert c.list("").status == 200
    assert time.monotonic() - t0 < 0.3
    c.set_faults()
    t0 = time.monotonic()
    assert c.get("r.bin").body == data
    assert time.monotonic() - t0 < 0.3


def test_fault_malformed_json_cuts_json_answers(local_server):
    c = local_server.client()
    c.set_faults(malformed_json=True)
    r = c.execute("echo x > m.txt")
    assert r.status == 200
    with pytest.raises(ValueError):
        r.json()
    assert (local_server.workspace / "m.txt").exists()  # the work was done
    assert c.get("m.txt").body == b"x\n"  # file bytes are not JSON


def test_fault_hostile_listing_mixes_invalid_entries_with_valid_ones(local_server):
    c = local_server.client()
    c.put("good.txt", b"1")
    c.set_faults(hostile_listing=True)
    names = [e.get("name") for e in c.list("").json()["entries"]]
    for bad in ("..", ".", "a/b", ""):
        assert bad in names
    assert "good.txt" in names
    assert any(e.get("size", 0) < 0 for e in c.list("").json()["entries"])


def test_fault_flag_sets_faults_at_start(tmp_path):
    with sbx.Server(tmp=tmp_path, faults=True,
                    fault=["lose_answer", "routes=execute", "delay_ms=5"]) as s:
        f = s.client().faults()
        assert f["lose_answer"] is True and f["routes"] == "execute" and f["delay_ms"] == 5
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            s.client().execute("true")
        assert s.client().healthz().status == 200


def test_bad_fault_flag_is_refused(tmp_path):
    r = subprocess.run([str(sbx.server_binary()), "--fault", "nonsense"], capture_output=True)
    assert r.returncode == 2 and b"unknown fault" in r.stderr


def test_binary_output_still_gives_valid_json(local_server):
    r = local_server.client().execute("printf 'a\\000b\\377c\\342\\202d'")
    res = r.json()
    # NUL is escaped; invalid UTF-8 bytes become U+FFFD one by one.
    assert res["stdout"] == "a\x00b\ufffdc\ufffd\ufffdd"


def test_put_over_a_directory_or_below_a_file_is_400(local_server):
    c = local_server.client()
    c.put("d/f.txt", b"x")
    assert c.put("d", b"x").status == 400
    assert c.put("d/f.txt/below", b"x").status == 400
    assert c.request("PUT", "/files/d/new/", body=b"x").status == 400
    assert c.get("d/new").status == 404
    assert c.get("d/f.txt").body == b"x"


def test_get_of_a_fifo_is_400_without_blocking(local_server):
    os.mkfifo(local_server.workspace / "pipe")
    t0 = time.monotonic()
    assert local_server.client(timeout=5).get("pipe").status == 400
    assert time.monotonic() - t0 < 2


def test_symlink_inside_the_workspace_is_followed(local_server):
    c = local_server.client()
    c.put("real/file.txt", b"via link")
    os.symlink("real", local_server.workspace / "alias")
    assert c.get("alias/file.txt").body == b"via link"
    entries = {e["name"]: e for e in c.list("").json()["entries"]}
    assert entries["alias"]["isDir"] is True
    assert c.delete("alias").status == 204  # removes the link, not the target
    assert c.get("real/file.txt").body == b"via link"


def test_a_command_keeps_running_after_its_client_disconnects(local_server):
    c = local_server.client()
    s = socket.create_connection(("127.0.0.1", local_server.port))
    body = b'{"command": "sleep 1; echo done > after.txt", "timeoutSeconds": 30}'
    s.sendall(b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(0.3)
    s.close()
    assert c.execute("true").status == 409  # the seat is still taken
    assert sbx.wait_for(lambda: (local_server.workspace / "after.txt").exists(), timeout=10)
    assert sbx.wait_for(lambda: c.execute("true").status == 200, timeout=5)


def test_fault_truncate_answer_sends_half_the_announced_body(local_server):
    c = local_server.client()
    data = os.urandom(100000)
    c.put("t.bin", data)
    c.set_faults(truncate_answer=True)
    with pytest.raises(http.client.IncompleteRead) as e:
        c.get("t.bin")
    assert len(e.value.partial) == 50000
    with pytest.raises(http.client.IncompleteRead):
        c.execute("echo half > half.txt")
    assert (local_server.workspace / "half.txt").exists()  # the work was done
    assert c.put("t.bin", b"new").status == 204  # no body: nothing to cut
    c.set_faults()
    assert c.get("t.bin").body == b"new"


def test_a_chunked_put_is_taken_whole(local_server):
    """A PUT whose body has no Content-Length (Transfer-Encoding: chunked,
    as the mount's early PUT sends it) is taken like any other, and counted
    in the server's stats."""
    c = local_server.client()
    parts = [os.urandom(100000) for _ in range(5)]
    before = c.stats()
    r = c.request("PUT", "/files/ch/unk.bin", body=iter(parts))
    assert r.status == 204
    assert c.get("ch/unk.bin").body == b"".join(parts)
    after = c.stats()
    assert after["chunked_puts"] - before["chunked_puts"] == 1
    assert after["puts"] - before["puts"] == 1
    c.put("plain.bin", b"x")
    assert c.stats()["chunked_puts"] == after["chunked_puts"]


@pytest.mark.parametrize("fault", ["refuse_chunked", "drop_chunked_kb"])
def test_chunked_put_faults_leave_the_file_and_plain_puts_alone(local_server, fault):
    c = local_server.client()
    c.put("keep.bin", b"old")
    c.set_faults(**({fault: True} if fault == "refuse_chunked" else {fault: 64}))
    parts = [os.urandom(64 * 1024) for _ in range(4)]
    try:
        r = local_server.client().request("PUT", "/files/keep.bin", body=iter(parts))
        assert r.status == 411 and fault == "refuse_chunked"
    except (ConnectionError, OSError, http.client.HTTPException):
        pass  # the connection was closed under the body
    assert c.get("keep.bin").body == b"old"
    assert c.put("keep.bin", b"new").status == 204
    assert c.get("keep.bin").body == b"new"
    c.set_faults()
