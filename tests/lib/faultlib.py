"""faultlib — helpers of the fault, crash, load and hostile-input tests
(stdlib only; builds on sbx and mount, which it does not change).

* ``sandbox_url(orch, sid)``: a sandbox's URL from the orchestrator (a
  secret: never print it). ``executed(orch, sid)``: the commands its
  /execute received, oldest first (the server's /_admin/log).
* ``ctl(path, command)``: one write() of ``command + "\\n"`` to a ctl file;
  returns 0 or the errno of the open or the write, and the seconds it took.
* ``write_file(path, data, fsync=False)``: open, write, (fsync,) close;
  returns (errno of the write or 0, errno of the fsync/close or 0).
* ``bounded(fn, seconds)``: runs fn in a thread and fails the test when it
  takes longer (the daemon must never hang past its timeouts).
* ``Timer``: elapsed seconds of a with-block.
* ``sanitizer_lines(text)``: AddressSanitizer / UBSan / TSan / LeakSanitizer
  report lines in what a process printed.
"""
import errno
import os
import re
import threading
import time

import sbx


sandbox_url = sbx.sandbox_url
executed = sbx.executed


class Timer:
    def __enter__(self):
        self.t0 = time.monotonic()
        self.s = None
        return self

    def __exit__(self, *exc):
        self.s = time.monotonic() - self.t0


def ctl(path, command):
    """One write() of a command; (errno or 0, seconds)."""
    t0 = time.monotonic()
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        return e.errno, time.monotonic() - t0
    try:
        data = (command + "\n").encode() if isinstance(command, str) else command
        n = os.write(fd, data)
        assert n == len(data), f"short ctl write {n} of {len(data)}"
        return 0, time.monotonic() - t0
    except OSError as e:
        return e.errno, time.monotonic() - t0
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def write_file(path, data, fsync=False, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    """(errno of open/write or 0, errno of fsync/close or 0)."""
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return e.errno, 0
    werr = 0
    try:
        off = 0
        while off < len(data):
            off += os.write(fd, data[off:off + (1 << 20)])
    except OSError as e:
        werr = e.errno
    cerr = 0
    if fsync and not werr:
        try:
            os.fsync(fd)
        except OSError as e:
            cerr = e.errno
    try:
        os.close(fd)
    except OSError as e:
        cerr = cerr or e.errno
    return werr, cerr


def bounded(fn, seconds, what="operation"):
    """fn() in a thread; its result, or AssertionError after seconds (the
    thread is left behind; the test's unmount ends it)."""
    box = {}

    def run():
        try:
            box["v"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{what} hung for more than {seconds} s"
    if "e" in box:
        raise box["e"]
    return box.get("v")


SANITIZER_RE = re.compile(r"(AddressSanitizer|LeakSanitizer|ThreadSanitizer|"
                          r"UndefinedBehaviorSanitizer|runtime error:)")


def sanitizer_lines(text):
    return [line for line in text.splitlines() if SANITIZER_RE.search(line)]


def errname(e):
    return errno.errorcode.get(e, str(e)) if e else "0"
