"""README.md stays true: every option of --help is in its configuration
table, and the tour's listings match what a mount shows today."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import mount  # noqa: E402

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def tour_output(command):
    """The lines the README's tour shows after `$ command`."""
    m = re.search(r"^\$ " + re.escape(command) + r"\n(.*?)(?=^\$ |^```)", README, re.M | re.S)
    assert m, f"the tour has no `{command}`"
    return m.group(1)


def test_every_option_is_in_the_configuration_table():
    p = subprocess.run([str(mount.sandboxfs_binary()), "--help"], capture_output=True,
                       text=True, timeout=20)
    table = README[README.index("## Configuration"):]
    table = table[:table.index("\n## ")]
    for name in re.findall(r"^ {4}-o (\w+)", p.stdout, re.M):
        assert f"`-o {name}" in table, f"README's configuration lacks -o {name}"


def test_tour_listings_match_a_mount(tmp_path):
    if not mount.fuse_available():
        pytest.skip("no /dev/fuse or fusermount3")
    m = mount.Mount(tmp_path, local=True)
    with m:
        os.mkdir(m.path("demo"))
        assert sorted(tour_output("ls sbx/demo").split()) == sorted(os.listdir(m.path("demo")))
        with open(m.path("demo", "ctl"), "w") as f:
            f.write("exit 3")
        shown = dict(re.findall(r'^(user\.sandbox\.\w+)="(.*)"$',
                                tour_output("getfattr -d sbx/demo"), re.M))
        names = sorted(os.listxattr(m.path("demo")))
        assert sorted(shown) == names
        assert os.getxattr(m.path("demo"), "user.sandbox.exit").decode() == "3"
        info = tour_output("cat sbx/demo/info")
        with open(m.path("demo", "info")) as f:
            real = f.read()
        assert re.findall(r'"(\w+)":', info) == re.findall(r'"(\w+)":', real)
    m.check_log()
