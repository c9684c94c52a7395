"""Fixtures of the fault, crash, hostile-input and security tests.

Each test gets its own local orchestrator (sandbox-server --orchestrator
--faults, random token), its own mount point and state directory, and a
time limit (env SANDBOXFS_FAULT_TIMEOUT, default 120 s); every mount is
unmounted, and a mount whose daemon printed a sanitizer report, an
unexpected error or a secret fails the test.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import faultlib  # noqa: E402
import mount  # noqa: E402
import sbx  # noqa: E402

TEST_TIMEOUT = int(os.environ.get("SANDBOXFS_FAULT_TIMEOUT", "120"))


def pytest_configure(config):
    config.addinivalue_line("markers", "long: long-running (not in the default suite)")
    config.addinivalue_line("markers", "timeout_s(n): this test's time limit in seconds")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SANDBOXFS_LONG") == "1":
        return
    skip = pytest.mark.skip(reason="long test: set SANDBOXFS_LONG=1 (.ci/run does)")
    for it in items:
        if "long" in it.keywords:
            it.add_marker(skip)


@pytest.fixture(autouse=True)
def _time_limit(request):
    m = request.node.get_closest_marker("timeout_s")
    with mount.time_limit(m.args[0] if m else TEST_TIMEOUT):
        yield


@pytest.fixture
def orch(tmp_path):
    with sbx.local_orchestrator(tmp_path) as s:
        yield s


class Mounts:
    """Mounts started by a test: all stopped at the end, then checked."""

    def __init__(self, tmp_path, orch):
        self.tmp = tmp_path
        self.orch = orch
        self.all = []
        self.allow = []

    def __call__(self, **kw):
        kw.setdefault("server", self.orch)
        m = mount.Mount(self.tmp, **kw)
        self.all.append(m)
        return m.start()


@pytest.fixture
def mounts(tmp_path, orch):
    ms = Mounts(tmp_path, orch)
    try:
        yield ms
    finally:
        for m in ms.all:
            m.stop()
    for m in ms.all:
        rep = faultlib.sanitizer_lines(m.output())
        assert not rep, "sandboxfs reported:\n" + "\n".join(rep[:20])
        m.check_log(allow=ms.allow)


@pytest.fixture
def mnt(mounts):
    return mounts()
