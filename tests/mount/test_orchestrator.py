"""The real orchestrator through the mount (DESIGN.md §4): request bounds,
the whole create spec, whose sandbox is whose, idle teardown, a lost
create, pools. Every claim is checked on the orchestrator's side."""
import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402
import sbx  # noqa: E402
from mount import sh  # noqa: E402


def orchestrator(tmp_path, *args, pools=()):
    (tmp_path / "orch").mkdir(exist_ok=True)
    return sbx.Server(orchestrator=True, faults=True, tmp=tmp_path / "orch",
                      args=list(args), pools=list(pools))


def creates(orch):
    """The create bodies the orchestrator received, oldest first."""
    r = orch.client().request("GET", "/_admin/creates")
    assert r.status == 200, r
    return r.json()


def ctl(m, line):
    return sh(f"printf '%s\\n' {sh_quote(line)} > {m.path('.sandboxfs', 'ctl')}")


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def info(m, sid):
    return json.loads(mount.read(m.path(sid, "info")))


def test_a_command_outlives_the_orchestrators_default_request_bound(tmp_path):
    """The orchestrator cuts each request at 2 s unless a create says
    otherwise: sandboxfs sends timeoutSeconds 0, so a 3 s command runs."""
    with orchestrator(tmp_path, "--sandbox-timeout", "2") as orch:
        with mount.Mount(tmp_path, server=orch) as m:
            os.mkdir(m.path("long"))
            body = [c for c in creates(orch) if c.get("id") == "long"]
            assert body and body[-1].get("timeoutSeconds") == 0, body
            p = sh(f"echo 'sleep 3; echo done' > {m.path('long', 'ctl')}", timeout=30)
            assert p.returncode == 0, p.stderr
            assert mount.read(m.path("long", "stdout")) == "done\n"
            assert mount.read(m.path("long", "status")) == "exited\n"
            assert info(m, "long")["request_bound"] == 0

            # A sandbox created elsewhere keeps the orchestrator's 2 s:
            # its bound is not known here, so it is assumed (300 s), and
            # a command the proxy cuts says so.
            r = orch.client().create(id="elsewhere", pool="default")
            assert r.status == 201, r
            assert "elsewhere" in os.listdir(m.mnt)
            p = sh(f"echo 'sleep 4' > {m.path('elsewhere', 'ctl')}", timeout=60)
            assert p.returncode != 0 and "Input/output error" in p.stderr, p
            assert mount.read(m.path("elsewhere", "status")) == "unknown\n"
            why = info(m, "elsewhere")["why"]
            assert "request bound" in why, why
        m.check_log(allow=[r"request bound", r"cut"])


def test_a_timeout_above_an_attached_sandboxs_assumed_bound_is_refused(tmp_path, orch):
    r = orch.client().create(id="att", pool="default")
    assert r.status == 201
    lst = tmp_path / "sandboxes"
    lst.write_text(f"att {r.json()['url']}\n")
    os.chmod(lst, 0o600)
    with mount.Mount(tmp_path, sandboxes=lst) as m:
        t = m.path("att", "timeout")
        for bad in ("301", "900", "0"):
            p = sh(f"echo {bad} > {t}")
            assert p.returncode != 0 and "Invalid argument" in p.stderr, (bad, p)
        assert mount.read(t) == "60\n"
        assert "request bound" in info(m, "att")["last_error"]
        assert info(m, "att")["request_bound"] == 300
        assert info(m, "att")["request_bound_assumed"] is True
        sh(f"echo 299 > {t}", check=True)
        assert mount.read(t) == "299\n"
        sh(f"echo 'echo ok' > {m.path('att', 'ctl')}", check=True)
        assert mount.read(m.path("att", "stdout")) == "ok\n"
        assert os.getxattr(m.path("att"), "user.sandbox.owner") == b"attached"
    m.check_log()


def test_create_with_a_spec_and_a_template(tmp_path, orch):
    template = tmp_path / "template.json"
    template.write_text(json.dumps({"environment": {"FROM_TEMPLATE": "t1", "FOO": "tmpl"},
                                    "idleTimeoutSeconds": 600}))
    with mount.Mount(tmp_path, server=orch, opts=[f"template={template}"]) as m:
        # mkdir: the template's fields reach the orchestrator
        os.mkdir(m.path("plain"))
        body = [c for c in creates(orch) if c.get("id") == "plain"][-1]
        assert body["environment"] == {"FROM_TEMPLATE": "t1", "FOO": "tmpl"}
        assert body["idleTimeoutSeconds"] == 600 and body["pool"] == "default"

        # create ID {JSON}: its own fields over the template's
        p = ctl(m, 'create web {"environment": {"FOO": "bar"}}')
        assert p.returncode == 0, p.stderr
        body = [c for c in creates(orch) if c.get("id") == "web"][-1]
        assert body["environment"] == {"FOO": "bar"}
        assert body["idleTimeoutSeconds"] == 600
        sh(f"echo 'echo $FOO' > {m.path('web', 'ctl')}", check=True)
        assert mount.read(m.path("web", "stdout")) == "bar\n"

        # info shows the spec with environment values masked
        i = info(m, "web")
        assert i["owner"] == "owned" and i["idle_timeout"] == 600
        assert i["spec"]["environment"] == {"FOO": "***"}
        assert "bar" not in mount.read(m.path("web", "info"))

        # a field the orchestrator refuses: EINVAL, its message in health
        p = ctl(m, 'create bad {"colour": "blue"}')
        assert p.returncode != 0 and "Invalid argument" in p.stderr, p
        assert "bad" not in os.listdir(m.mnt)
        health = mount.read(m.path(".sandboxfs", "health"))
        assert "last error: create bad" in health and "colour" in health, health
        # not JSON: refused before any request
        n = len(creates(orch))
        p = ctl(m, "create worse {not json")
        assert p.returncode != 0 and len(creates(orch)) == n
    m.check_log(allow=[r"create bad", r"create worse"])
    journal = sh(f"{mount.sandboxfs_binary()} --dump-journal {m.state}", check=True).stdout
    assert "CREATE_INTENT web" in journal and "spec=(" in journal
    assert "bar" not in journal


def test_someone_elses_sandbox_that_left_frees_what_was_read(tmp_path, orch):
    c = orch.client()
    assert c.create(id="seen", pool="default").status == 201
    assert sbx.put(sbx.sandbox_url(orch, "seen"), "data.txt", b"theirs\n").status == 204
    with mount.Mount(tmp_path, server=orch) as m:
        assert mount.read(m.path("seen", "workspace", "data.txt")) == "theirs\n"

        def kept():
            s = dict(line.split(" ", 1) for line in
                     mount.read(m.path(".sandboxfs", "stats")).splitlines())
            return int(s["cache_files"]), int(s["listing_entries"])
        assert kept()[0] == 1 and kept()[1] >= 1
        assert c.delete_sandbox("seen").status == 204
        # its first use journaled it: it shows "gone" until rmdir
        assert sbx.wait_for(lambda: os.listdir(m.mnt) and
                            mount.read(m.path("seen", "state")) == "gone\n", timeout=10)
        assert kept() == (0, 0)
    m.check_log(allow=[r"vanished"])


def test_someone_elses_sandbox_survives_rmdir_star_and_recover(tmp_path, orch):
    c = orch.client()
    assert c.create(id="theirs", pool="default").status == 201
    with mount.Mount(tmp_path, server=orch) as m:
        os.mkdir(m.path("mine"))
        assert sorted(os.listdir(m.mnt)) == [".sandboxfs", "mine", "theirs"]
        assert os.getxattr(m.path("theirs"), "user.sandbox.owner") == b"foreign"
        assert info(m, "theirs")["owner"] == "foreign"
        # usable
        sh(f"echo 'echo hi' > {m.path('theirs', 'ctl')}", check=True)
        assert mount.read(m.path("theirs", "stdout")) == "hi\n"

        p = sh(f"rmdir {m.mnt}/*")
        assert "theirs" in p.stderr and "Operation not permitted" in p.stderr, p
        assert ctl(m, "recover").returncode == 0
        assert c.sandbox("theirs").status == 200
        assert c.sandbox("mine").status == 404
        assert sorted(os.listdir(m.mnt)) == [".sandboxfs", "theirs"]

        # only an explicit delete deletes it
        assert ctl(m, "delete theirs").returncode == 0
        assert c.sandbox("theirs").status == 404
        assert "theirs" not in os.listdir(m.mnt)
    m.check_log()


def test_keepalive_holds_an_idle_sandbox_while_a_file_is_open(tmp_path, orch):
    c = orch.client()
    with mount.Mount(tmp_path, server=orch) as m:
        assert ctl(m, "create held idle=3").returncode == 0
        assert info(m, "held")["idle_timeout"] == 3
        with open(m.path("held", "workspace", "notes.txt"), "w") as f:
            f.write("kept open\n")
            f.flush()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                assert c.sandbox("held").status == 200, "torn down while held"
                time.sleep(1)
        # closed: nothing held, so the orchestrator tears it down
        assert sbx.wait_for(lambda: c.sandbox("held").status == 404, timeout=15)
        assert sbx.wait_for(
            lambda: mount.read(m.path("held", "state")) == "gone\n"
            if "held" in os.listdir(m.mnt) else True, timeout=10)
        stats = mount.read(m.path(".sandboxfs", "stats"))
        kept = int(stats.split("keepalives ")[1].split()[0])
        assert kept >= 5, stats  # one at least every 1.5 s for 10 s
    m.check_log()


def test_keepalive_can_be_turned_off(tmp_path, orch):
    c = orch.client()
    with mount.Mount(tmp_path, server=orch, opts=["keepalive=no"]) as m:
        assert ctl(m, "create loose idle=2").returncode == 0
        fd = os.open(m.path("loose", "workspace", "f"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"x")
            assert sbx.wait_for(lambda: c.sandbox("loose").status == 404, timeout=15)
        finally:
            try:
                os.close(fd)  # its upload may fail: the sandbox is gone
            except OSError:
                pass
        assert int(mount.read(m.path(".sandboxfs", "stats"))
                   .split("keepalives ")[1].split()[0]) == 0
    m.check_log(allow=[r"gone|vanished|rescue|not found|404|upload"])


def test_a_lost_create_stays_unknown_then_a_second_mkdir_adopts_it(tmp_path, orch):
    c = orch.client()
    with mount.Mount(tmp_path, server=orch) as m:
        c.set_faults(create_lose_answer=True, hide_new_ms=3000)
        p = sh(f"mkdir {m.path('lost')}", timeout=60)
        assert p.returncode != 0 and "Input/output error" in p.stderr, p
        # the create did happen; the directory stays, unknown
        assert "lost" in os.listdir(m.mnt)
        assert mount.read(m.path("lost", "state")) == "unknown\n"
        assert "unconfirmed create" in mount.read(m.path(".sandboxfs", "health"))
        # rmdir forgets it; a second mkdir gets a 409 and adopts it
        os.rmdir(m.path("lost"))
        c.set_faults(hide_new_ms=3000)
        os.mkdir(m.path("lost"))
        assert mount.read(m.path("lost", "state")) == "ready\n"
        assert info(m, "lost")["owner"] == "owned"
        ids = [b.get("id") for b in creates(orch)]
        assert ids.count("lost") == 2  # never a third create
        sh(f"echo 'echo adopted' > {m.path('lost', 'ctl')}", check=True)
        assert mount.read(m.path("lost", "stdout")) == "adopted\n"
        os.rmdir(m.path("lost"))  # owned: deleted
        assert c.sandbox("lost").status == 404
    m.check_log(allow=[r"lost|unknown|answer"])


def test_pools_show_why_a_create_is_refused(tmp_path):
    with orchestrator(tmp_path, pools=["small:1"]) as orch:
        with mount.Mount(tmp_path, server=orch, opts=["pool=small"]) as m:
            os.mkdir(m.path("one"))
            p = sh(f"mkdir {m.path('two')}")
            assert p.returncode != 0 and "Resource temporarily unavailable" in p.stderr, p
            pools = mount.read(m.path(".sandboxfs", "pools"))
            line = [ln for ln in pools.splitlines() if ln.startswith("small ")]
            assert line and "size=1" in line[0] and "claimed=1" in line[0], pools
        m.check_log(allow=[r"create two"])


def test_a_poolless_create_shows_creating_and_its_mkdir_can_be_interrupted(tmp_path):
    """A create from an image takes seconds (here 4): readers see
    "creating", an interrupted mkdir returns at once, and the create goes
    on and is recorded."""
    with orchestrator(tmp_path, "--image-start-ms", "4000") as orch:
        template = tmp_path / "template.json"
        template.write_text(json.dumps({"image": "python:3.12-slim", "port": 3000}))
        with mount.Mount(tmp_path, server=orch, opts=[f"template={template}"]) as m:
            t0 = time.monotonic()
            p = sh(f"timeout -s INT 1 mkdir {m.path('cold')}", timeout=30)
            took = time.monotonic() - t0
            assert p.returncode != 0 and took < 3, (p, took)
            assert mount.read(m.path("cold", "state")) == "creating\n"
            assert sbx.wait_for(
                lambda: mount.read(m.path("cold", "state")) == "ready\n", timeout=20)
            assert orch.client().sandbox("cold").status == 200
            assert info(m, "cold")["owner"] == "owned"
            sh(f"echo 'echo warm' > {m.path('cold', 'ctl')}", check=True)
            assert mount.read(m.path("cold", "stdout")) == "warm\n"
            # an uninterrupted mkdir waits for the whole start
            t0 = time.monotonic()
            os.mkdir(m.path("patient"))
            assert time.monotonic() - t0 >= 3.5
            assert mount.read(m.path("patient", "state")) == "ready\n"
        m.check_log()
