"""Starting Spark's JVM without running Python between fork and exec.

PySpark starts its gateway JVM with a `preexec_fn` that ignores SIGINT (so a terminal's Ctrl-C
does not reach the JVM), which makes CPython fork and run Python in the child before `exec`. In a
process with other threads (DuckDB's, the metadata store's, a test runner's) that child can crash
first, and the session fails with JAVA_GATEWAY_EXITED: seen in the suite about once in three runs.
Here the launch ignores SIGINT in the caller for the moment of the spawn instead (the JVM inherits
an ignored signal and leaves it ignored), so CPython spawns with no Python code in the child, and
the JVM stays in the caller's process group, where a task's shutdown finds it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_launching = threading.Lock()


@contextmanager
def gateway_without_preexec() -> Iterator[None]:
    """While held, PySpark's gateway launch spawns the JVM without its `preexec_fn`; one launch at a
    time, the module's `Popen` restored after. Off the main thread, where a signal's disposition
    cannot be changed, the JVM does not ignore SIGINT (only a terminal's Ctrl-C sends it)."""
    from pyspark import java_gateway as gateway_module

    java_gateway: Any = gateway_module  # its `Popen` is the subprocess class it imported
    original = java_gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("preexec_fn", None)
        if threading.current_thread() is not threading.main_thread():
            return original(*args, **kwargs)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return original(*args, **kwargs)
        finally:
            signal.signal(signal.SIGINT, previous)

    with _launching:
        java_gateway.Popen = popen
        try:
            yield
        finally:
            java_gateway.Popen = original
