"""contrib/demo.sh, the main job of `./setup.sh run`: it must run a command
through a local orchestrator and print neither the token nor a URL."""
import re
import subprocess

import sbx


def test_demo_runs_uname_in_a_sandbox_and_prints_no_secret():
    r = subprocess.run([str(sbx.REPO / "contrib" / "demo.sh"), str(sbx.build_dir())],
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "created sandbox 'demo'" in out and "deleted sandbox 'demo'" in out
    uname = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip()
    assert uname in out
    assert "http://" not in out and "127.0.0.1:" not in out
    assert not re.search(r"[0-9a-f]{32}", out)
