"""Lookups of one directory run in parallel (fuse/dirops.c): libfuse 3.14
never tells the kernel FUSE_PARALLEL_DIROPS, and the kernel then holds a
directory's mutex around each LOOKUP in it. All sandboxes live in the mount
root, so one slow lookup there (a name the mount must ask the orchestrator
about) held up every other sandbox's first lookup."""
import os
import threading
import time

import mount
import sbx

DELAY_S = 3.0


def test_a_slow_lookup_in_the_root_does_not_hold_up_another(tmp_path, orch):
    c = orch.client()
    assert c.create(pool="default", id="other").status == 201
    m = mount.Mount(tmp_path, server=orch).start()
    try:
        # the mount knows "other" from its start; the kernel has no entry
        # for it yet (nothing listed the root), so its stat is a LOOKUP.
        # Past listing_ttl (1 s), a name the mount does not know makes it
        # ask the orchestrator again.
        time.sleep(1.5)
        c.set_faults(delay_ms=int(DELAY_S * 1000))
        took = {}

        def unknown():
            t = time.monotonic()
            try:
                os.stat(m.path("nosuch"))
            except FileNotFoundError:
                pass
            took["unknown"] = time.monotonic() - t

        th = threading.Thread(target=unknown)
        th.start()
        time.sleep(0.5)  # its LOOKUP waits for the orchestrator now
        t = time.monotonic()
        assert os.path.isdir(m.path("other"))
        took["other"] = time.monotonic() - t
        th.join(30)
        # the unknown name did wait for the orchestrator ...
        assert took["unknown"] >= DELAY_S * 0.8, took
        # ... and the known one did not wait for it (serialized, it took
        # the rest of those 3 s)
        assert took["other"] < DELAY_S / 3, took
    finally:
        orch.client().set_faults()
        m.stop()
