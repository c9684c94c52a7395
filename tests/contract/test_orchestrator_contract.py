"""Conformance of an orchestrator to the sandbox API (CONTRACT.md).

Runs against ORCHESTRATOR_URL (+ ORCHESTRATOR_TOKEN, ORCHESTRATOR_POOL) when
set, else a local sandbox-server --orchestrator with a token. Each test is
named after the rule it checks. Creates use the pool; ORCHESTRATOR_IMAGE and
ORCHESTRATOR_IMAGE_PORT name an image for the image rules (the local
orchestrator accepts any image).
"""
import os
import re
import time

import pytest

import sbx

IMAGE = os.environ.get("ORCHESTRATOR_IMAGE", "local/sandbox:latest")
IMAGE_PORT = int(os.environ.get("ORCHESTRATOR_IMAGE_PORT", "3000"))
STATUSES = {"creating", "ready", "failed", "deleting"}


def wait_ready(orch, sid, timeout=120):
    """Poll a new sandbox until it leaves 'creating'; it must be readable
    all along."""
    deadline = time.monotonic() + timeout
    while True:
        r = orch.sandbox(sid)
        assert r.status == 200, r.status
        st = r.json()
        if st["status"] != "creating" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert st["status"] == "ready", st.get("error")
    return st


def error_json(r):
    body = r.json()
    assert isinstance(body.get("error"), str) and body["error"], body
    return body


def test_create_with_pool_returns_201_status(orch, pool, new_id):
    sid = new_id()
    r = orch.create(pool=pool, id=sid)
    assert r.status == 201, r.status
    st = r.json()
    assert st["id"] == sid
    assert st["poolId"] == pool
    assert st["status"] in STATUSES
    assert isinstance(st.get("urls", {}), dict)
    if st["status"] != "failed":
        assert "error" not in st, st
    st = wait_ready(orch, sid)
    assert "error" not in st, st
    assert st["url"].startswith("http")
    assert st["url"] in st["urls"].values()


def test_created_sandbox_url_serves_the_contract(orch, pool, new_id):
    sid = new_id()
    assert orch.create(pool=pool, id=sid).status == 201
    url = wait_ready(orch, sid)["url"]
    box = sbx.Client(url)
    assert box.healthz().json() == {"status": "ok"}
    r = box.execute("echo hello")
    assert r.status == 200 and r.json()["stdout"] == "hello\n"


def test_create_without_id_generates_pool_dash_8_hex(orch, pool):
    r = orch.create(pool=pool)
    assert r.status == 201
    sid = r.json()["id"]
    try:
        assert re.fullmatch(re.escape(pool) + r"-[0-9a-f]{8}", sid), sid
    finally:
        orch.delete_sandbox(sid)


def test_create_with_a_live_id_is_409(orch, pool, new_id):
    sid = new_id()
    assert orch.create(pool=pool, id=sid).status == 201
    r = orch.create(pool=pool, id=sid)
    assert r.status == 409
    error_json(r)


@pytest.mark.parametrize("bad", ["Upper", "-lead", "trail-", "a" * 64, "under_score",
                                 "dot.ted", "", "sp ace", "ünï"])
def test_create_with_an_invalid_id_is_400(orch, pool, bad):
    r = orch.create(pool=pool, id=bad)
    assert r.status == 400, (bad, r.status)
    error_json(r)


def test_create_with_a_63_character_id_is_accepted(orch, pool, new_id):
    sid = new_id("c" * 54)
    assert len(sid) == 63
    r = orch.create(pool=pool, id=sid)
    assert r.status == 201 and r.json()["id"] == sid


def test_create_needs_exactly_one_of_pool_or_image(orch, pool):
    r = orch.create()
    assert r.status == 400
    error_json(r)
    r = orch.create(pool=pool, image=IMAGE, port=IMAGE_PORT)
    assert r.status == 400
    error_json(r)


def test_create_with_image_requires_port(orch, new_id):
    r = orch.create(image=IMAGE, id=new_id())
    assert r.status == 400
    error_json(r)
    sid = new_id()
    r = orch.create(image=IMAGE, port=IMAGE_PORT, id=sid)
    assert r.status == 201
    assert r.json()["image"] == IMAGE
    assert r.json().get("poolId") is None  # absent (or null) without a pool


def test_create_accepts_every_documented_field(orch, pool, new_id):
    r = orch.create(pool=pool, id=new_id(), idleTimeoutSeconds=600, timeoutSeconds=300,
                    environment={"A": "1"}, ports=[8080], artifacts=[], command="sleep 1")
    assert r.status == 201, r.status
    r = orch.create(image=IMAGE, port=IMAGE_PORT, id=new_id(), cpu=1, memory=512,
                    runtimeClass="runc", volumes=[], timeoutSeconds=0)
    assert r.status == 201, r.status
    st = r.json()
    # The shape may be absent from a status; when shown it is what was asked.
    assert st.get("cpu", 1) == 1 and st.get("memory", 512) == 512, st


def test_create_with_an_unknown_field_is_400(orch, pool, new_id):
    r = orch.create(pool=pool, id=new_id(), flavour="vanilla")
    assert r.status == 400
    error_json(r)


def test_create_without_json_content_type_is_415(orch, pool, new_id):
    body = ('{"pool": "%s", "id": "%s"}' % (pool, new_id())).encode()
    for ctype in ("text/plain", None):
        r = orch.request("POST", "/v1/sandbox", body=body, headers={"Content-Type": ctype})
        assert r.status == 415, (ctype, r.status)
        error_json(r)


def test_create_with_timeout_seconds_out_of_range_is_400(orch, pool, new_id):
    for t in (3601, -1):
        r = orch.create(pool=pool, id=new_id(), timeoutSeconds=t)
        assert r.status == 400, (t, r.status)


def test_create_with_poolless_fields_and_a_pool_is_400(orch, pool, new_id):
    r = orch.create(pool=pool, id=new_id(), cpu=1)
    assert r.status == 400
    error_json(r)


def test_create_in_an_unknown_pool_is_404(orch, new_id):
    r = orch.create(pool="no-such-pool-" + new_id(), id=new_id())
    assert r.status == 404
    error_json(r)


def test_missing_or_wrong_bearer_token_is_401(orchestrator_env, pool, new_id):
    url, token, _ = orchestrator_env
    if not token:
        pytest.skip("the orchestrator under test has no key configured")
    for bad in (None, token + "x", "wrong"):
        c = sbx.Client(url, token=bad)
        for r in (c.sandboxes(), c.create(pool=pool, id=new_id()), c.sandbox("x"),
                  c.delete_sandbox("x"), c.pools()):
            assert r.status == 401, r.status
            error_json(r)
    r = sbx.Client(url).request("GET", "/v1/sandbox", headers={"Authorization": token})
    assert r.status == 401


def test_list_sandboxes_includes_the_created_ones(orch, pool, new_id):
    a, b = new_id(), new_id()
    orch.create(pool=pool, id=a)
    orch.create(pool=pool, id=b)
    r = orch.sandboxes()
    assert r.status == 200
    boxes = r.json()["sandboxes"]
    ids = {s["id"] for s in boxes}
    assert {a, b} <= ids
    for s in boxes:
        assert s["status"] in STATUSES


def test_get_sandbox_returns_its_status_and_404_when_unknown(orch, pool, new_id):
    sid = new_id()
    orch.create(pool=pool, id=sid)
    r = orch.sandbox(sid)
    assert r.status == 200 and r.json()["id"] == sid
    r = orch.sandbox(new_id())
    assert r.status == 404
    error_json(r)


def test_delete_is_204_then_404_and_the_url_stops_answering(orch, pool, new_id):
    sid = new_id()
    orch.create(pool=pool, id=sid)
    url = wait_ready(orch, sid)["url"]
    assert orch.delete_sandbox(sid).status == 204
    r = orch.delete_sandbox(sid)
    assert r.status == 404
    error_json(r)
    assert orch.sandbox(sid).status == 404

    def dead():
        try:
            return sbx.Client(url, timeout=5).healthz().status != 200
        except OSError:
            return True
    assert sbx.wait_for(dead, timeout=30), "the deleted sandbox's URL still answers"


def test_a_deleted_id_can_be_created_again(orch, pool, new_id):
    sid = new_id()
    orch.create(pool=pool, id=sid)
    orch.delete_sandbox(sid)
    assert orch.create(pool=pool, id=sid).status == 201


def test_idle_sandbox_is_torn_down_after_idle_timeout(orch, pool, new_id):
    sid = new_id()
    r = orch.create(pool=pool, id=sid, idleTimeoutSeconds=1)
    assert r.status == 201
    gone = sbx.wait_for(lambda: orch.sandbox(sid).status == 404, timeout=30, interval=0.25)
    assert gone, "an idle sandbox was not torn down"


def test_pools_are_listed_with_live_counts(orch, pool, new_id):
    r = orch.pools()
    assert r.status == 200
    pools = r.json()["pools"]
    assert isinstance(pools, list) and pool in [p.get("id") for p in pools], pools
    for p in pools:
        assert isinstance(p["id"], str) and p["id"], p
        if "image" in p:
            assert isinstance(p["image"], str), p
        for key in ("size", "warm", "claimed"):
            assert isinstance(p[key], int) and not isinstance(p[key], bool), (key, p)
            assert p[key] >= 0, (key, p)
    r = orch.pool(pool)
    assert r.status == 200
    one = r.json()
    assert isinstance(one, dict) and one["id"] == pool
    for key in ("size", "warm", "claimed"):
        assert isinstance(one[key], int) and one[key] >= 0, (key, one)
    r = orch.pool("no-such-pool-" + new_id())
    assert r.status == 404
    error_json(r)


def test_environment_reaches_every_command(orch, pool, new_id):
    sid = new_id()
    r = orch.create(pool=pool, id=sid, environment={"FOO": "bar", "TWO": "a b"})
    assert r.status == 201, r
    box = sbx.Client(wait_ready(orch, sid)["url"])
    for _ in range(2):
        r = box.execute('echo $FOO; echo "$TWO"')
        assert r.status == 200 and r.json()["stdout"] == "bar\na b\n", r


def test_timeout_seconds_bounds_each_request_with_504(orch, pool, new_id):
    sid = new_id()
    r = orch.create(pool=pool, id=sid, timeoutSeconds=2)
    assert r.status == 201, r
    box = sbx.Client(wait_ready(orch, sid)["url"], timeout=30)
    assert box.execute("echo quick").status == 200
    t0 = time.monotonic()
    r = box.execute("sleep 4; echo late", timeout_seconds=30)
    took = time.monotonic() - t0
    # Past the bound the proxy answers, whatever the agent was told.
    assert r.status == 504, (r.status, r.body[:200])
    assert 1.5 <= took < 3.9, took


def test_timeout_seconds_zero_leaves_requests_unbounded(orch, pool, new_id):
    sid = new_id()
    r = orch.create(pool=pool, id=sid, timeoutSeconds=0)
    assert r.status == 201, r
    box = sbx.Client(wait_ready(orch, sid)["url"], timeout=30)
    r = box.execute("sleep 3; echo done", timeout_seconds=30)
    assert r.status == 200 and r.json()["stdout"] == "done\n", r


def test_a_create_may_be_seen_creating_by_a_concurrent_read(orch, new_id):
    """An image create returns once ready or failed; a read meanwhile sees
    404 (not yet recorded), creating (without requiring a url) or ready."""
    import threading
    sid = new_id()
    done = {}

    def create():
        done["r"] = orch.create(image=IMAGE, port=IMAGE_PORT, id=sid)

    t = threading.Thread(target=create)
    t.start()
    seen = []
    deadline = time.monotonic() + 120
    while t.is_alive() and time.monotonic() < deadline:
        r = orch.sandbox(sid)
        assert r.status in (200, 404), r.status
        if r.status == 200:
            st = r.json()
            assert st["id"] == sid and st["status"] in STATUSES, st
            if st["status"] == "creating":
                assert st.get("url") is None or isinstance(st["url"], str)
                assert sid in {b["id"] for b in orch.sandboxes().json()["sandboxes"]}
            seen.append(st["status"])
        time.sleep(0.1)
    t.join(timeout=120)
    assert not t.is_alive(), "the create did not return"
    r = done["r"]
    assert r.status == 201, r
    assert r.json()["status"] in ("ready", "failed"), r.json()
    assert set(seen) <= {"creating", "ready"}, seen
