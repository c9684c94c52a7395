"""A short mount session under valgrind memcheck (--leak-check=full): no
invalid access, no leak "definitely lost". Long (valgrind is slow):
SANDBOXFS_LONG=1, which .ci/run sets for its long pass.
"""
import os
import re

import pytest

import faultlib as fl
from faultlib import ctl, sandbox_url, write_file
import mount
import sbx


class ValgrindMount(mount.Mount):
    def __init__(self, *a, vglog, **kw):
        super().__init__(*a, **kw)
        self.vglog = vglog

    def command(self):
        return ["valgrind", "--tool=memcheck", "--leak-check=full", "--errors-for-leak-kinds=definite",
                "--show-leak-kinds=definite", "--error-exitcode=99", "--track-fds=no",
                f"--log-file={self.vglog}"] + super().command()


@pytest.mark.long
@pytest.mark.timeout_s(600)
def test_mount_session_under_valgrind(tmp_path, orch):
    vglog = tmp_path / "valgrind.log"
    m = ValgrindMount(tmp_path, server=orch, vglog=vglog)
    m.start(timeout=120)
    try:
        os.mkdir(m.path("vg"))
        url = sandbox_url(orch, "vg")
        m.secrets.append(url)
        d = m.path("vg")
        assert ctl(d / "ctl", "echo hi; seq 1 20000")[0] == 0
        assert mount.read(d / "stdout").startswith("hi\n")
        assert mount.read(d / "exit") == "0\n"
        ws = d / "workspace"
        for i in range(20):
            assert write_file(ws / f"f{i}.txt", os.urandom(3000 * i)) == (0, 0)
        os.mkdir(ws / "sub")
        os.rename(ws / "f1.txt", ws / "sub" / "g.txt")
        os.unlink(ws / "f2.txt")
        assert sorted(os.listdir(ws / "sub")) == ["g.txt"]
        for i in (3, 4, 5):
            assert len(open(ws / f"f{i}.txt", "rb").read()) == 3000 * i
        sbx.set_faults(url, error_rate=1.0, routes="files")
        assert write_file(ws / "pending.txt", b"p")[1] != 0
        sbx.set_faults(url, lose_answer=True, routes="execute")
        assert ctl(d / "ctl", "true")[0] != 0
        sbx.set_faults(url)
        assert sbx.wait_for(lambda: mount.read(m.path(".sandboxfs", "health")) == "ok\n",
                            timeout=60)
        mount.read(m.path(".sandboxfs", "stats"))
        mount.read(d / "info")
        os.listdir(d / "runs")
    finally:
        rc = m.stop(timeout=120)
    text = vglog.read_text()
    lost = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks", text)
    summary = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    print(f"\nvalgrind: {lost.group(0) if lost else 'definitely lost: 0 (no leak summary)'}; "
          f"{summary.group(0) if summary else 'no summary'}; rc {rc}")
    assert summary, text[-3000:]
    assert not lost or lost.group(1) == "0", text[-5000:]
    assert summary.group(1) == "0", text[-5000:]
    assert rc == 0, (rc, text[-3000:])
    m.check_log(allow=[r"upload failed", r"kept pending", r"answer lost", r"unknown",
                       r"server error", r"injected"])
