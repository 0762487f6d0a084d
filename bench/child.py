"""One benchmark run as a child process, its figures read from the last JSON line it prints.

Shared by `python -m bench` (every benchmark) and `python -m bench.spark` (the Spark ones).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any


def run_one(name: str, args: list[str], timeout: float) -> dict[str, Any]:
    """`{"figures": ..., "printed": ..., "seconds": ...}`, or `{"error": ...}`: a failed benchmark
    must not lose the others' figures."""
    started = time.monotonic()
    print(f"== bench.{name} {' '.join(args)}", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", *args], capture_output=True, text=True, timeout=timeout
    )
    sys.stderr.write(done.stderr[-4000:])
    seconds = round(time.monotonic() - started, 1)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {
            "error": f"exit {done.returncode}",
            "tail": (done.stdout + done.stderr)[-2000:],
            "seconds": seconds,
        }
    # the tables a benchmark prints for people go to stderr; stdout ends with its JSON figures
    try:
        figures = json.loads(lines[-1])
    except json.JSONDecodeError as e:  # one benchmark's output must not lose the others' figures
        return {
            "error": f"last output line is not JSON ({e})",
            "tail": done.stdout[-2000:],
            "seconds": seconds,
        }
    return {"figures": figures, "printed": done.stderr[-6000:], "seconds": seconds}
