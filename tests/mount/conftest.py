"""Fixtures of the mounted-filesystem tests.

Each test gets its own local orchestrator (sandbox-server --orchestrator
--faults, random token), its own mount point and state directory, and a
time limit; the mount is always unmounted, and the test fails when the
daemon printed an unexpected error or warning or any secret.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402
import sbx  # noqa: E402

TEST_TIMEOUT = int(os.environ.get("SANDBOXFS_TEST_TIMEOUT", "90"))


@pytest.fixture(autouse=True)
def _time_limit(request):
    with mount.time_limit(TEST_TIMEOUT):
        yield


@pytest.fixture
def orch(tmp_path):
    with sbx.local_orchestrator(tmp_path) as s:
        yield s


@pytest.fixture
def mnt(tmp_path, orch):
    m = mount.Mount(tmp_path, server=orch)
    m.start()
    try:
        yield m
    finally:
        m.stop()
    m.check_log(allow=getattr(m, "allow", ()))


@pytest.fixture
def sandbox(mnt):
    """A sandbox created through the mount (mkdir): its directory."""
    d = mnt.path("sbx1")
    os.mkdir(d)
    return d


# the tests import these from here
sandbox_url = sbx.sandbox_url
executed = sbx.executed
