"""Fixtures of the examples' tests: each test runs one script of examples/
against its own embedded default (sandboxfs --local), unmounted after."""
import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TEST_TIMEOUT = int(os.environ.get("SANDBOXFS_TEST_TIMEOUT", "90"))


@pytest.fixture(autouse=True)
def _time_limit():
    if not mount.fuse_available():
        pytest.skip("no /dev/fuse or fusermount3")

    def expired(signum, frame):
        raise TimeoutError(f"test exceeded {TEST_TIMEOUT} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_TIMEOUT)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def local(tmp_path):
    m = mount.Mount(tmp_path, local=True)
    m.start()
    try:
        yield m
    finally:
        m.stop()
    m.check_log()
