"""Test-only: holds a task's publish while a file says so, so tests can act on a task in flight.

Python imports `sitecustomize` at start-up from any directory on PYTHONPATH; the coordinator tests
put this one there for the coordinator (whose environment its task processes inherit) and set
STRATA_TEST_HOLD_PUBLISH to a directory. A publish carrying a task's guard (every segment pushed
to deep storage, nothing published yet) then writes `publishing-<pid>` there and waits while a
file `hold` exists and no file `release-<pid>` lets that one process go on. Nothing changes for a
process without that variable.
"""

import os

_HOLD = os.environ.get("STRATA_TEST_HOLD_PUBLISH")

if _HOLD:
    import time
    from pathlib import Path

    from strata.storage import sqlite_store

    _publish = sqlite_store.SQLiteMetadataStore.publish

    _WHERE = Path(_HOLD)

    def _held(self, segments, *, overwrite, guard=None, replace=None):
        if guard is not None:
            where = _WHERE
            (where / f"publishing-{os.getpid()}").write_text("\n".join(s.id for s in segments))
            while (where / "hold").exists() and not (where / f"release-{os.getpid()}").exists():
                time.sleep(0.05)
        return _publish(self, segments, overwrite=overwrite, guard=guard, replace=replace)

    sqlite_store.SQLiteMetadataStore.publish = _held  # type: ignore[method-assign]
