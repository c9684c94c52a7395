"""The local orchestrator's request bound, cold start, create log and the
faults of lost creates (--sandbox-timeout, --image-start-ms,
GET /_admin/creates, create_lose_answer, hide_new_ms)."""
import http.client
import threading
import time

import pytest

import sbx

LOST = (http.client.RemoteDisconnected, ConnectionError)


def timed(fn):
    t0 = time.monotonic()
    r = fn()
    return r, time.monotonic() - t0


def test_the_default_sandbox_timeout_bounds_requests_and_a_create_overrides_it(tmp_path):
    with sbx.Server(orchestrator=True, faults=True, args=["--sandbox-timeout", "2"],
                    tmp=tmp_path) as s:
        c = s.client()
        st = c.create(pool="default", id="short").json()
        assert st["timeoutSeconds"] == 2
        box = sbx.Client(st["url"], timeout=30)
        r, took = timed(lambda: box.execute("sleep 3; echo late", timeout_seconds=30))
        assert r.status == 504 and 1.8 <= took < 2.8, (r, took)
        assert r.json() == {"error": "request exceeded the sandbox's timeoutSeconds (2 s)"}
        # The command goes on: its seat stays busy until it ends.
        assert box.execute("echo busy").status == 409
        assert sbx.wait_for(lambda: box.execute("echo free").status == 200, timeout=5)
        assert box.stats()["bounded"] == 1
        st = c.create(pool="default", id="longer", timeoutSeconds=5).json()
        assert st["timeoutSeconds"] == 5
        r, took = timed(lambda: sbx.Client(st["url"], timeout=30).execute("sleep 3; echo ok"))
        assert r.status == 200 and r.json()["stdout"] == "ok\n" and took >= 2.9


def test_the_bound_covers_files_and_healthz_too(tmp_path):
    with sbx.Server(orchestrator=True, faults=True, tmp=tmp_path) as s:
        c = s.client()
        st = c.create(pool="default", id="slowfs", timeoutSeconds=1).json()
        box = sbx.Client(st["url"], timeout=30)
        assert box.put("a.txt", b"abc").status == 204
        c.set_faults(delay_ms=2500, routes="all")
        for call in (lambda: box.get("a.txt"), box.healthz):
            r, took = timed(call)
            assert r.status == 504 and took < 2, (r, took)
        c.set_faults()
        assert box.get("a.txt").body == b"abc"
        assert box.stats()["bounded"] == 2


def test_the_standalone_server_is_unbounded_unless_told(tmp_path):
    (tmp_path / "a").mkdir()
    with sbx.Server(tmp=tmp_path / "a") as s:
        r = s.client(timeout=30).execute("sleep 2; echo whole")
        assert r.status == 200 and r.json()["stdout"] == "whole\n"
    (tmp_path / "b").mkdir()
    with sbx.Server(args=["--sandbox-timeout", "1"], tmp=tmp_path / "b") as s:
        r, took = timed(lambda: s.client(timeout=30).execute("sleep 2"))
        assert r.status == 504 and took < 1.8, (r, took)


def test_an_image_create_is_creating_without_url_until_it_serves(tmp_path):
    with sbx.Server(orchestrator=True, args=["--image-start-ms", "1500"], tmp=tmp_path) as s:
        c = s.client()
        out = {}
        t = threading.Thread(target=lambda: out.setdefault(
            "r", c.create(image="img:1", port=8080, id="cold")))
        t0 = time.monotonic()
        t.start()
        assert sbx.wait_for(lambda: c.sandbox("cold").status == 200, timeout=1)
        st = c.sandbox("cold").json()
        assert st["status"] == "creating" and "url" not in st and st["urls"] == {}
        listed = {b["id"]: b for b in c.sandboxes().json()["sandboxes"]}
        assert listed["cold"]["status"] == "creating" and "url" not in listed["cold"]
        assert c.create(image="img:1", port=8080, id="cold").status == 409
        # A pool create meanwhile is immediate.
        r, took = timed(lambda: c.create(pool="default", id="warm"))
        assert r.status == 201 and took < 0.5
        t.join(10)
        took = time.monotonic() - t0
        r = out["r"]
        assert r.status == 201 and r.json()["status"] == "ready" and 1.4 <= took < 3
        assert sbx.Client(r.json()["url"]).healthz().status == 200
        assert c.sandbox("cold").json()["status"] == "ready"


def test_a_sandbox_deleted_while_creating_never_serves(tmp_path):
    with sbx.Server(orchestrator=True, args=["--image-start-ms", "1000"], tmp=tmp_path) as s:
        c = s.client()
        out = {}
        t = threading.Thread(target=lambda: out.setdefault(
            "r", c.create(image="img:1", port=8080, id="doomed")))
        t.start()
        assert sbx.wait_for(lambda: c.sandbox("doomed").status == 200, timeout=1)
        assert c.delete_sandbox("doomed").status == 204
        assert c.sandbox("doomed").status == 404
        t.join(10)
        assert out["r"].status == 201 and out["r"].json()["status"] == "deleting"
        assert c.sandbox("doomed").status == 404
        assert not (s.root / "doomed").exists()


def test_stopping_interrupts_a_cold_start(tmp_path):
    s = sbx.Server(orchestrator=True, args=["--image-start-ms", "600000"], tmp=tmp_path)
    s.start()
    try:
        c = s.client()
        out = {}

        def create():
            try:
                out["r"] = c.create(image="img:1", port=8080, id="forever")
            except Exception as e:  # or the connection is closed
                out["e"] = e
        t = threading.Thread(target=create, daemon=True)
        t.start()
        assert sbx.wait_for(lambda: c.sandbox("forever").status == 200, timeout=2)
        t0 = time.monotonic()
        s.stop()
        assert time.monotonic() - t0 < 5
        t.join(5)
        assert "e" in out or out["r"].status == 503, out
        s.start()
        assert s.client().sandbox("forever").status == 404
        assert not (s.root / "forever").exists()
    finally:
        s.cleanup()


def test_admin_creates_lists_the_create_bodies_in_order(local_orchestrator):
    c = local_orchestrator.client()
    bodies = [
        {"pool": "default", "id": "one", "environment": {"A": "1"}, "timeoutSeconds": 7},
        {"pool": "default", "id": "bad", "flavour": "vanilla"},
        {"image": "img:2", "port": 8080, "id": "two", "memory": 512, "cpu": 0.5},
    ]
    for b in bodies:
        c.create(b)
    r = c.request("GET", "/_admin/creates")
    assert r.status == 200 and r.json() == bodies
    r = c.request("GET", "/_admin/nothing-here")
    assert r.status == 404


def test_create_lose_answer_creates_then_closes_unanswered(local_orchestrator):
    c = local_orchestrator.client()
    c.set_faults(create_lose_answer=True)
    assert c.faults()["create_lose_answer"] is True
    with pytest.raises(LOST):
        c.create(pool="default", id="ghost")
    # Other calls are answered; the sandbox exists and serves.
    st = c.sandbox("ghost").json()
    assert st["status"] == "ready"
    assert sbx.Client(st["url"]).execute("echo here").json()["stdout"] == "here\n"
    assert c.create(pool="default", id="ghost").status == 409
    c.set_faults()
    assert c.create(pool="default", id="seen").status == 201


def test_hide_new_ms_hides_a_new_sandbox_from_reads_only(local_orchestrator):
    c = local_orchestrator.client()
    c.set_faults(hide_new_ms=1500)
    t0 = time.monotonic()
    assert c.create(pool="default", id="lagging").status == 201
    assert c.sandbox("lagging").status == 404
    assert "lagging" not in {b["id"] for b in c.sandboxes().json()["sandboxes"]}
    r = c.create(pool="default", id="lagging")
    assert r.status == 409, r
    assert sbx.wait_for(lambda: c.sandbox("lagging").status == 200, timeout=5)
    assert 1.3 <= time.monotonic() - t0 < 4
    assert "lagging" in {b["id"] for b in c.sandboxes().json()["sandboxes"]}
    # DELETE is not hidden.
    c.create(pool="default", id="gone-soon")
    assert c.delete_sandbox("gone-soon").status == 204


def test_a_lost_create_reconciled_by_get_sees_404_and_a_retry_409(local_orchestrator):
    c = local_orchestrator.client()
    c.set_faults(create_lose_answer=True, hide_new_ms=1000)
    with pytest.raises(LOST):
        c.create(pool="default", id="twice")
    assert c.sandbox("twice").status == 404
    assert c.create(pool="default", id="twice").status == 409
    c.set_faults()
    assert c.sandbox("twice").json()["status"] == "ready"
    assert [b["id"] for b in c.request("GET", "/_admin/creates").json()] == ["twice", "twice"]


def test_a_full_pool_is_429_until_a_seat_is_freed(tmp_path):
    with sbx.Server(orchestrator=True, pools=["one:1"], tmp=tmp_path) as s:
        c = s.client()
        assert c.create(pool="one", id="first").status == 201
        assert c.pool("one").json()["warm"] == 0
        r = c.create(pool="one", id="second")
        assert r.status == 429 and r.json()["error"]
        c.delete_sandbox("first")
        assert c.create(pool="one", id="second").status == 201
