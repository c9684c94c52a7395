"""Conformance of a sandbox to the sandbox contract (CONTRACT.md).

Runs against SANDBOX_URL when set, else a local sandbox-server. Each test is
named after the rule it checks. Linux sandboxes with a POSIX shell are
assumed (the commands use sh, cat, sleep, head, /proc).
"""
import hashlib
import json
import threading
import time

import pytest

MIB = 1024 * 1024


def ok_json(r):
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    return r.json()


# --- GET /healthz ---

def test_healthz_answers_200_status_ok(sandbox):
    r = sandbox.healthz()
    assert r.status == 200
    assert r.json() == {"status": "ok"}


# --- POST /execute ---

def test_execute_returns_exit_code_stdout_stderr_duration_truncated(sandbox):
    r = sandbox.execute("echo $((2+2)); echo oops >&2")
    assert r.status == 200
    res = ok_json(r)
    assert res["exitCode"] == 0
    assert res["stdout"] == "4\n"
    assert res["stderr"] == "oops\n"
    assert isinstance(res["durationMillis"], int) and res["durationMillis"] >= 0
    assert res["truncated"] is False


def test_execute_reports_the_exit_code_of_a_failing_command(sandbox):
    r = sandbox.execute("exit 7")
    assert r.status == 200
    assert r.json()["exitCode"] == 7


def test_execute_runs_shell_dash_c(sandbox):
    # Shell syntax (variables, arithmetic, pipes, quoting) reaches a shell.
    r = sandbox.execute("a=5; echo \"$((a * 2))\" | tr 1 x; printf '%s|' 'q r'")
    assert r.status == 200
    assert r.json()["stdout"] == "x0\nq r|"


def test_execute_runs_in_the_workspace(sandbox, scratch):
    assert sandbox.put(f"{scratch}/marker.txt", b"in-workspace").status == 204
    r = sandbox.execute(f"cat {scratch}/marker.txt && echo made > {scratch}/made.txt")
    assert r.status == 200
    assert r.json()["stdout"] == "in-workspace"
    got = sandbox.get(f"{scratch}/made.txt")
    assert got.status == 200 and got.body == b"made\n"


def test_execute_runs_in_its_own_process_group(sandbox):
    # Field 5 of /proc/PID/stat is the process group: the shell leads it.
    r = sandbox.execute("echo $$ $(cut -d' ' -f5 /proc/$$/stat)")
    assert r.status == 200
    pid, pgid = r.json()["stdout"].split()
    assert pid == pgid


def test_execute_timeout_kills_and_reports_124(sandbox):
    t0 = time.monotonic()
    r = sandbox.execute("sleep 30; echo not-killed", timeout_seconds=1)
    elapsed = time.monotonic() - t0
    assert r.status == 200
    res = r.json()
    assert res["exitCode"] == 124
    assert "not-killed" not in res["stdout"]
    assert 900 <= res["durationMillis"] <= 5000
    assert elapsed < 5, f"answered after {elapsed:.1f}s for a 1s timeout"


def test_execute_timeout_kills_the_whole_process_tree(sandbox, scratch):
    sandbox.put(f"{scratch}/.keep", b"")
    r = sandbox.execute(f"sh -c 'sleep 300 & echo $! > {scratch}/pid; wait'; sleep 300",
                        timeout_seconds=1)
    assert r.status == 200 and r.json()["exitCode"] == 124
    # The grandchild must be gone (or a zombie about to be reaped).
    check = (f"p=$(cat {scratch}/pid); for i in $(seq 50); do "
             f"if [ ! -e /proc/$p ] || [ \"$(cut -d' ' -f3 /proc/$p/stat)\" = Z ]; "
             f"then echo gone; exit 0; fi; sleep 0.1; done; echo alive")
    r = sandbox.execute(check, timeout_seconds=30)
    assert r.json()["stdout"].strip() == "gone"


def test_execute_timeout_zero_means_no_limit(sandbox):
    r = sandbox.execute("sleep 1.5; echo done", timeout_seconds=0)
    assert r.status == 200
    assert r.json()["exitCode"] == 0 and r.json()["stdout"] == "done\n"


@pytest.mark.long
def test_execute_default_timeout_is_60_seconds(sandbox):
    t0 = time.monotonic()
    r = sandbox.execute("sleep 75", timeout=120)
    elapsed = time.monotonic() - t0
    assert r.json()["exitCode"] == 124
    assert 58 <= elapsed <= 70


def test_execute_second_command_while_one_runs_is_409(sandbox, scratch):
    sandbox.put(f"{scratch}/.keep", b"")
    first = {}

    def run():
        first["r"] = sandbox.execute(f"touch {scratch}/started; sleep 3", timeout_seconds=30)

    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while sandbox.get(f"{scratch}/started").status != 200:
            assert time.monotonic() < deadline, "the first command never started"
            time.sleep(0.05)
        r = sandbox.execute("echo second")
        assert r.status == 409
    finally:
        t.join(60)
    assert first["r"].status == 200 and first["r"].json()["exitCode"] == 0
    # The seat is free again.
    r = sandbox.execute("echo again")
    assert r.status == 200 and r.json()["stdout"] == "again\n"


def test_execute_output_capped_at_1_mib_per_stream_with_truncated(sandbox):
    r = sandbox.execute("head -c 3000000 /dev/zero | tr '\\0' a; "
                        "head -c 3000000 /dev/zero | tr '\\0' b >&2")
    assert r.status == 200
    res = r.json()
    assert res["truncated"] is True
    for stream, ch in (("stdout", "a"), ("stderr", "b")):
        n = len(res[stream].encode())
        assert 512 * 1024 <= n <= MIB, f"{stream} has {n} bytes"
        assert set(res[stream]) == {ch}


def test_execute_output_under_1_mib_is_complete(sandbox):
    r = sandbox.execute("head -c 1000000 /dev/zero | tr '\\0' c")
    res = r.json()
    assert res["truncated"] is False
    assert res["stdout"] == "c" * 1000000


def test_execute_duration_millis_measures_the_run(sandbox):
    t0 = time.monotonic()
    r = sandbox.execute("sleep 1")
    elapsed = (time.monotonic() - t0) * 1000
    d = r.json()["durationMillis"]
    assert 950 <= d <= elapsed + 50


# --- /files ---

def test_files_put_returns_204_and_get_returns_the_bytes(sandbox, scratch):
    data = bytes(range(256)) * 1000 + b"\x00end"
    r = sandbox.put(f"{scratch}/bin.dat", data)
    assert r.status == 204
    r = sandbox.get(f"{scratch}/bin.dat")
    assert r.status == 200
    assert hashlib.sha256(r.body).digest() == hashlib.sha256(data).digest()


def test_files_put_of_an_empty_file_reads_back_empty(sandbox, scratch):
    assert sandbox.put(f"{scratch}/empty", b"").status == 204
    r = sandbox.get(f"{scratch}/empty")
    assert r.status == 200 and r.body == b""


def test_files_put_creates_parent_directories(sandbox, scratch):
    assert sandbox.put(f"{scratch}/a/b/c/deep.txt", b"deep").status == 204
    assert sandbox.get(f"{scratch}/a/b/c/deep.txt").body == b"deep"
    listing = sandbox.list(f"{scratch}/a/b").json()
    assert {"name": "c", "isDir": True}.items() <= next(
        e for e in listing["entries"] if e["name"] == "c").items()


def test_files_put_truncates_an_existing_file(sandbox, scratch):
    sandbox.put(f"{scratch}/t.txt", b"a long first version\n" * 100)
    assert sandbox.put(f"{scratch}/t.txt", b"short").status == 204
    assert sandbox.get(f"{scratch}/t.txt").body == b"short"


def test_files_get_of_a_directory_lists_name_size_isdir(sandbox, scratch):
    sandbox.put(f"{scratch}/f.txt", b"12345")
    sandbox.put(f"{scratch}/sub/g.txt", b"x")
    r = sandbox.list(scratch)
    assert r.status == 200
    entries = {e["name"]: e for e in ok_json(r)["entries"]}
    assert set(entries) == {"f.txt", "sub"}
    assert entries["f.txt"]["size"] == 5 and entries["f.txt"]["isDir"] is False
    assert entries["sub"]["isDir"] is True


def test_files_root_is_listed_at_files_slash(sandbox, scratch):
    sandbox.put(f"{scratch}/x", b"x")
    r = sandbox.request("GET", "/files/")
    assert r.status == 200
    names = [e["name"] for e in r.json()["entries"]]
    assert scratch in names


def test_files_listing_entries_are_valid_names_sizes_kinds(sandbox, scratch):
    sandbox.put(f"{scratch}/one", b"1")
    sandbox.put(f"{scratch}/dir/two", b"22")
    for path in ("", scratch, f"{scratch}/dir"):
        r = sandbox.list(path)
        assert r.status == 200
        for e in r.json()["entries"]:
            assert isinstance(e.get("name"), str), e
            assert e["name"] not in ("", ".", ".."), e
            assert "/" not in e["name"] and "\0" not in e["name"], e
            assert isinstance(e.get("size"), int) and not isinstance(e["size"], bool), e
            assert e["size"] >= 0, e
            assert isinstance(e.get("isDir"), bool), e


def test_files_delete_removes_a_file(sandbox, scratch):
    sandbox.put(f"{scratch}/gone.txt", b"bye")
    assert sandbox.delete(f"{scratch}/gone.txt").status == 204
    assert sandbox.get(f"{scratch}/gone.txt").status == 404


def test_files_delete_removes_a_whole_tree(sandbox, scratch):
    for p in ("t/a.txt", "t/b/c.txt", "t/b/d/e.txt"):
        sandbox.put(f"{scratch}/{p}", b"x")
    assert sandbox.delete(f"{scratch}/t").status == 204
    assert sandbox.get(f"{scratch}/t").status == 404
    assert sandbox.get(f"{scratch}/t/b/c.txt").status == 404


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_files_absolute_path_is_400(sandbox, method):
    for path in ("/files//etc/passwd", "/files/%2Fetc%2Fpasswd"):
        r = sandbox.request(method, path, body=b"x" if method == "PUT" else None)
        assert r.status == 400, (method, path, r.status)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_files_dotdot_is_400(sandbox, method):
    for path in ("/files/../etc/passwd", "/files/a/../../etc/passwd", "/files/..",
                 "/files/%2e%2e/etc/passwd", "/files/a/%2E%2E/b"):
        r = sandbox.request(method, path, body=b"x" if method == "PUT" else None)
        assert r.status == 400, (method, path, r.status)


def test_files_missing_path_is_404(sandbox, scratch):
    assert sandbox.get(f"{scratch}/nope.txt").status == 404
    assert sandbox.get(f"{scratch}/no/such/dir").status == 404
    assert sandbox.delete(f"{scratch}/nope.txt").status == 404


def test_files_no_escape_through_symlinks(sandbox, scratch):
    sandbox.put(f"{scratch}/.keep", b"")
    r = sandbox.execute(f"ln -s / {scratch}/root && ln -s /etc/hostname {scratch}/host && "
                        f"mkdir -p /tmp/sbx-ct && echo outside > /tmp/sbx-ct/{scratch} && "
                        f"ln -s /tmp/sbx-ct/{scratch} {scratch}/out")
    assert r.json()["exitCode"] == 0
    try:
        for path in ("root/etc/hostname", "host", "root/tmp"):
            r = sandbox.get(f"{scratch}/{path}")
            assert 400 <= r.status < 500, (path, r.status)
        r = sandbox.put(f"{scratch}/root/tmp/sbx-ct/{scratch}", b"escaped")
        assert 400 <= r.status < 500
        sandbox.put(f"{scratch}/out", b"replaced")  # may replace the link itself
        r = sandbox.execute(f"cat /tmp/sbx-ct/{scratch}")
        assert r.json()["stdout"] == "outside\n"
    finally:
        sandbox.execute(f"rm -f /tmp/sbx-ct/{scratch}")


def test_files_names_are_percent_decoded(sandbox, scratch):
    name = "sp ace%25#?&+é"
    assert sandbox.put(f"{scratch}/{name}", b"odd").status == 204
    names = [e["name"] for e in sandbox.list(scratch).json()["entries"]]
    assert names == [name]
    assert sandbox.get(f"{scratch}/{name}").body == b"odd"
    r = sandbox.execute(f"cat '{scratch}/{name}'")
    assert r.json()["stdout"] == "odd"


def test_files_written_by_a_command_are_listed_with_their_size(sandbox, scratch):
    sandbox.put(f"{scratch}/.keep", b"")
    sandbox.execute(f"head -c 12345 /dev/zero > {scratch}/z.bin")
    entries = {e["name"]: e for e in sandbox.list(scratch).json()["entries"]}
    assert entries["z.bin"]["size"] == 12345
