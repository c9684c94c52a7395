"""Fixtures of the installation tests: one `meson install --destdir` of the
build under test, shared by the module, and what it installed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402
import sbx  # noqa: E402


class Installed:
    """Paths of an installation under DESTDIR: `abs(p)` maps an installed
    absolute path (as the installed files name it) to where it is."""

    def __init__(self, destdir, opts, version):
        self.destdir = Path(destdir)
        self.version = version
        self.prefix = opts["prefix"]
        self.bindir = os.path.join(self.prefix, opts["bindir"])
        self.mandir = os.path.join(self.prefix, opts["mandir"])
        self.datadir = os.path.join(self.prefix, opts["datadir"])

    def abs(self, path):
        assert os.path.isabs(path), path
        return self.destdir / path.lstrip("/")

    def bin(self, name):
        return self.abs(os.path.join(self.bindir, name))


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    build = str(sbx.build_dir())
    dest = tmp_path_factory.mktemp("destdir")
    p = subprocess.run(["meson", "install", "-C", build, "--destdir", str(dest),
                        "--no-rebuild", "--quiet"], capture_output=True, text=True,
                       timeout=180, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    intro = subprocess.run(["meson", "introspect", build, "--buildoptions",
                            "--projectinfo"], capture_output=True, text=True,
                           timeout=60, check=True)
    info = json.loads(intro.stdout)
    opts = {o["name"]: o["value"] for o in info["buildoptions"]}
    return Installed(dest, opts, info["projectinfo"]["version"])


@pytest.fixture
def need_fuse():
    if not mount.fuse_available():
        pytest.skip("no /dev/fuse or fusermount3")
