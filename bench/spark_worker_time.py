"""Where a Spark task's Python worker spends a table read's wall time, from py-spy's stacks.

`py-spy record --idle --threads -f raw` on Spark's Python workers during timed reads samples every
thread, running or waiting. A task's worker has two threads that matter (strata.spark.read_ahead):
the main thread, which writes each batch to the JVM and blocks while the JVM has not taken the
last one, and the read-ahead thread, which reads segment files (or data nodes' answers) and blocks
while two batches already wait. Sorting their samples answers whether a read's time goes per file
(opening files, footers, the schema check) or per row (decoding pages, handing batches to Spark),
and which side waits for the other.
"""

from __future__ import annotations

from collections import Counter

RATE_HZ = 200  # py-spy samples per second (`-r`)

# per-file work of the read-ahead thread: the schema check and opening/closing each file
_PER_FILE = ("split_by_file ", "ParquetFile.__init__ ", "ParquetFile.close ", "_resolve_filesystem_and_path ")
_PER_ROW = ("iter_batches ", "whole_scan_batches ", "conform_batch ", "read_from_nodes ", "scan_batches ")
_WAITING = ("Condition.wait ", "Queue.get ", "Queue.put ")


def _thread(stack: list[str]) -> str:
    """`main`, `read-ahead` or `other`, from py-spy's `thread (ID): NAME` root frame."""
    root = stack[0] if stack else ""
    if root.endswith("MainThread"):
        return "main"
    return "read-ahead" if root.endswith("strata-read-ahead") else "other"


def classify(stack: list[str]) -> str | None:
    """The category of one sampled stack (root frame first), None outside a task's read."""
    thread = _thread(stack)
    leaf = stack[-1] if stack else ""
    if thread == "main":
        if any(f.startswith("ArrowStreamSerializer.dump_stream ") for f in stack[-2:]):
            return "main: writing a batch to the JVM (waits while the JVM converts the last)"
        if leaf.startswith(_WAITING) and any("read_ahead " in f for f in stack):
            return "main: waiting for the read-ahead thread's next batch"
        return None  # between tasks (the daemon's loop, reading the next command)
    if thread == "read-ahead":
        if leaf.startswith(_WAITING):
            return "read-ahead: waiting, two batches ready (Spark is slower)"
        if any(f.startswith(_PER_FILE) for f in stack):
            return "read-ahead: per file (schema check, opening and closing files)"
        if any(f.startswith(_PER_ROW) for f in stack):
            return "read-ahead: per row (decoding pages, conforming batches)"
        return "read-ahead: other"
    return None


def worker_seconds(raw: str, reads: int, rate_hz: int = RATE_HZ) -> dict[str, float]:
    """Seconds per read in each category, summed over the workers whose stacks `raw` holds."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        category = classify(stack.split(";"))
        if category is not None:
            counts[category] += int(count)
    return {k: round(n / rate_hz / max(1, reads), 3) for k, n in sorted(counts.items())}
