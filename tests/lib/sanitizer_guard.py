"""sanitizer_guard — a pytest plugin that fails a test when any process it
started (the sandboxfs daemon, sandbox-server, a C test) wrote a
sanitizer report.

Load it with ``-p sanitizer_guard`` (tests/lib on PYTHONPATH) and point the
sanitizers at a directory::

    SANITIZER_LOG_DIR=/tmp/x
    ASAN_OPTIONS=log_path=/tmp/x/asan:...   UBSAN_OPTIONS=log_path=/tmp/x/ubsan:...
    TSAN_OPTIONS=log_path=/tmp/x/tsan:...

(.ci/run does this). Every report file that appears during a test fails
that test, with the report's first lines, and is moved to DIR/seen/;
files that appeared outside any test stay in DIR and are printed at the
end of the session (.ci/run counts them as a failure).
Without SANITIZER_LOG_DIR it does nothing.
"""
import os

import pytest

_DIR = os.environ.get("SANITIZER_LOG_DIR")


def _reports():
    if not _DIR or not os.path.isdir(_DIR):
        return set()
    return {os.path.join(_DIR, n) for n in os.listdir(_DIR)
            if os.path.isfile(os.path.join(_DIR, n))}


def _set_aside(paths):
    """Reports already charged to a test go to DIR/seen/."""
    seen = os.path.join(_DIR, "seen")
    os.makedirs(seen, exist_ok=True)
    for p in paths:
        try:
            os.rename(p, os.path.join(seen, os.path.basename(p)))
        except OSError:
            pass


def _excerpt(paths):
    out = []
    for p in sorted(paths):
        try:
            with open(p, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        out.append(f"--- {os.path.basename(p)}")
        out += lines[:40]
    return "\n".join(out)


_seen = set()


@pytest.fixture(autouse=True)
def _sanitizer_reports():
    before = _reports()
    _seen.update(before)
    yield
    new = _reports() - before
    _seen.update(new)
    if new:
        text = _excerpt(new)
        _set_aside(new)
        pytest.fail("sanitizer report(s):\n" + text, pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    late = _reports() - _seen
    if late:
        print("\nsanitizer report(s) outside a test:\n" + _excerpt(late))
        session.exitstatus = 1
