"""Fixtures of the contract conformance suite.

The suite runs against:
  * SANDBOX_URL (a sandbox serving the contract) when set, else a local
    sandbox-server from $SANDBOXFS_BUILD/server/sandbox-server;
  * ORCHESTRATOR_URL (+ ORCHESTRATOR_TOKEN, ORCHESTRATOR_POOL) when set,
    else a local sandbox-server --orchestrator with a random token.
Tests that need the local server's process (memory, process tree, restart)
are in test_local_*.py and use the `local_*` fixtures.
"""
import os
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import sbx  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "long: slow checks, run with SANDBOX_CONTRACT_LONG=1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SANDBOX_CONTRACT_LONG") == "1":
        return
    keep = [i for i in items if "long" not in i.keywords]
    dropped = [i for i in items if "long" in i.keywords]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def sandbox_url():
    url = os.environ.get("SANDBOX_URL")
    if url:
        yield url.rstrip("/")
        return
    server = sbx.start_server()
    try:
        yield server.url
    finally:
        server.cleanup()


@pytest.fixture
def sandbox(sandbox_url):
    """A Client of the sandbox under test."""
    return sbx.Client(sandbox_url, timeout=60)


@pytest.fixture
def scratch(sandbox, request):
    """A fresh directory name in the workspace for one test, removed after."""
    name = f"ct-{request.node.name[:40]}-{secrets.token_hex(4)}"
    yield name
    try:
        sandbox.delete(name)
    except Exception:
        pass


@pytest.fixture(scope="session")
def orchestrator_env():
    """(url, token, pool) of the orchestrator under test."""
    url = os.environ.get("ORCHESTRATOR_URL")
    if url:
        yield (url.rstrip("/"), os.environ.get("ORCHESTRATOR_TOKEN") or None,
               os.environ.get("ORCHESTRATOR_POOL", "default"))
        return
    server = sbx.start_server(orchestrator=True)
    try:
        yield server.url, server.token, "default"
    finally:
        server.cleanup()


@pytest.fixture
def orch(orchestrator_env):
    url, token, _ = orchestrator_env
    return sbx.Client(url, token=token, timeout=120)


@pytest.fixture
def pool(orchestrator_env):
    return orchestrator_env[2]


@pytest.fixture
def new_id(orch):
    """Ids for sandboxes a test creates; every one is deleted after."""
    made = []

    def make(prefix="ct"):
        sid = f"{prefix}-{secrets.token_hex(4)}"
        made.append(sid)
        return sid

    yield make
    for sid in made:
        try:
            orch.delete_sandbox(sid)
        except Exception:
            pass


@pytest.fixture
def local_server(tmp_path):
    """A local sandbox-server of its own, with /_admin/ (not SANDBOX_URL)."""
    (tmp_path / "server").mkdir()
    server = sbx.Server(faults=True, tmp=tmp_path / "server").start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def local_orchestrator(tmp_path):
    """A local orchestrator of its own, with a token and /_admin/."""
    (tmp_path / "orch").mkdir()
    server = sbx.Server(orchestrator=True, faults=True, tmp=tmp_path / "orch").start()
    try:
        yield server
    finally:
        server.cleanup()
