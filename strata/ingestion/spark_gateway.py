"""Starting Spark's JVM without running Python between fork and exec.

PySpark starts its gateway JVM with a `preexec_fn` (so a terminal's Ctrl-C does not reach the JVM),
which makes CPython fork and run Python in the child before `exec`. In a process with other
threads (DuckDB's, the metadata store's, a test runner's) that child can crash first, and the
session fails with JAVA_GATEWAY_EXITED: seen in the suite about once in three runs. Starting the
JVM in a session of its own keeps it out of the terminal's process group, the same effect, and
lets CPython spawn it with no Python code in the child.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_launching = threading.Lock()


@contextmanager
def gateway_in_own_session() -> Iterator[None]:
    """While held, PySpark's gateway launch spawns the JVM with `start_new_session` instead of its
    `preexec_fn`; one launch at a time, the module's `Popen` restored after."""
    from pyspark import java_gateway as gateway_module

    java_gateway: Any = gateway_module  # its `Popen` is the subprocess class it imported
    original = java_gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("preexec_fn", None)
        kwargs["start_new_session"] = True
        return original(*args, **kwargs)

    with _launching:
        java_gateway.Popen = popen
        try:
            yield
        finally:
            java_gateway.Popen = original
