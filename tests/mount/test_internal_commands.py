"""Commands sandboxfs runs for itself through /execute (a directory
rename's mv, a batch of chmods) stay internal: stdout, stderr, exit,
status, last and runs/ show only the user's commands, also after a
remount (the journal marks them); info may count them. An internal command
whose outcome is unknown is never sent again, like any other.
"""
import errno
import json
import os

from conftest import executed, sandbox_url
import faultlib
import mount
import sbx


def runs(sbdir):
    return sorted(os.listdir(sbdir / "runs"), key=int)


def user_view(sbdir):
    """What a script sees of the latest command."""
    return {name: mount.read(sbdir / name)
            for name in ("stdout", "stderr", "exit", "status", "last")}


def internal(sent):
    return [c for c in sent if " mv -- " in c or c.startswith("mv -- ") or "chmod " in c]


def test_internal_commands_never_become_the_users_last_run(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    with m:
        os.mkdir(m.path("sbx1"))
        sb = m.path("sbx1")
        ws = sb / "workspace"
        err, _ = faultlib.ctl(sb / "ctl", "echo user; echo oops >&2")
        assert err == 0, faultlib.errname(err)
        seen = user_view(sb)
        assert seen == {"stdout": "user\n", "stderr": "oops\n", "exit": "0\n",
                        "status": "exited\n", "last": "1\n"}, seen

        # A directory rename runs mv through /execute.
        os.mkdir(ws / "d")
        with open(ws / "d" / "x", "w") as f:
            f.write("x\n")
        os.rename(ws / "d", ws / "e")
        assert [c for c in executed(orch, "sbx1") if "mv -- " in c], \
            "the rename did not run mv"
        assert user_view(sb) == seen
        assert runs(sb) == ["1"]

        # A queued mode runs as a batched chmod before the next command.
        os.chmod(ws / "e" / "x", 0o755)
        err, _ = faultlib.ctl(sb / "ctl", "echo two")
        assert err == 0, faultlib.errname(err)
        sent = executed(orch, "sbx1")
        assert [c for c in sent if "chmod 0755" in c], sent
        shown = runs(sb)
        assert len(shown) == 2 and shown[0] == "1", shown
        two = shown[1]
        assert mount.read(sb / "runs" / two / "command") == "echo two\n"
        view = user_view(sb)
        assert view["stdout"] == "two\n" and view["last"] == two + "\n", view
        info = json.loads(mount.read(sb / "info"))
        assert info["last"] == int(two) and info["status"] == "exited", info
        assert info["commands_run"] == 4, info  # internal ones counted here
        assert os.getxattr(sb, "user.sandbox.last") == two.encode()
    # After a remount the journal still tells them apart.
    m2 = mount.Mount(tmp_path, server=orch)
    with m2:
        sb = m2.path("sbx1")
        assert runs(sb) == ["1", two]
        assert user_view(sb) == view
    m.check_log()
    m2.check_log()


def test_internal_command_with_unknown_outcome_is_never_resent(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    with m:
        os.mkdir(m.path("sbx1"))
        url = sandbox_url(orch, "sbx1")
        m.secrets.append(url)
        sb = m.path("sbx1")
        ws = sb / "workspace"
        with open(ws / "tool", "w") as f:
            f.write("#!/bin/sh\n")
        os.mkdir(ws / "d")
        with open(ws / "d" / "x", "w") as f:
            f.write("x\n")
        os.chmod(ws / "tool", 0o700)
        # Every answer to /execute is lost: the chmod batch and the user's
        # command run, and their outcome is unknown.
        sbx.set_faults(url, lose_answer=True, routes="execute")
        try:
            err, _ = faultlib.ctl(sb / "ctl", "echo first")
            assert err == errno.EIO, faultlib.errname(err)
            try:
                os.rename(ws / "d", ws / "e")
                raise AssertionError("rename succeeded without an answer")
            except OSError as e:
                assert e.errno == errno.EIO, e
        finally:
            sbx.set_faults(url)
        before = executed(orch, "sbx1")
        assert len(internal(before)) == 2, before
        err, _ = faultlib.ctl(sb / "ctl", "echo second")
        assert err == 0, faultlib.errname(err)
        after = executed(orch, "sbx1")
        assert internal(after) == internal(before), after
        assert after[-1] == "echo second", after
        assert mount.read(sb / "stdout") == "second\n"
        cmds = [mount.read(sb / "runs" / r / "command") for r in runs(sb)]
        assert cmds == ["echo first\n", "echo second\n"], cmds
        # The mode's outcome is unknown: not reported as applied.
        assert os.stat(ws / "tool").st_mode & 0o777 == 0o644
    m.check_log(allow=(r"unknown", r"answer", r"lost", r"queued modes"))
