"""`json_paths`: the JSONPath of every literal of a JSON value, in Druid's order.

Druid walks the value breadth first (`StructuredDataProcessor`): an object's fields and an array's
elements are read in turn, objects and arrays going back in the queue; a scalar is a literal, and
so is an array of scalars only (empty too), not its elements. The paths are gathered in Java
`HashSet`s of path-part lists, one per object or array merged into the query's, and listed in the
set's order; `_JavaHashSet` reproduces that order from Java's hash codes (`Objects.hash` of an
element's index or a field's name, `List.hashCode` of a path), which is what Druid's answers show.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import orjson

PathPart = int | str  # an array element's index or an object field's name
Path = tuple[PathPart, ...]

_INT = 0xFFFFFFFF


def json_paths(text: str) -> list[str]:
    """Druid's `json_paths` of one JSON document."""
    value = orjson.loads(text)
    if not isinstance(value, (dict, list)):
        return ["$"]
    found = _JavaHashSet()
    queue: deque[tuple[Path, object]] = deque([((), value)])
    while queue:
        path, node = queue.popleft()
        literals = _JavaHashSet()  # the paths one object or array adds, as Druid merges them
        items: Iterable[tuple[PathPart, object]] = node.items() if isinstance(node, dict) else []
        if isinstance(node, list):
            if not any(isinstance(v, (dict, list)) for v in node):
                literals.add(path)
            else:
                items = enumerate(node)
        for part, inner in items:
            if isinstance(inner, (dict, list)):
                queue.append(((*path, part), inner))
            else:
                literals.add((*path, part))
        for p in literals:
            found.add(p)
    return [_normalized(p) for p in found]


def _normalized(path: Path) -> str:
    """`NestedPathFinder.toNormalizedJsonPath`: `$.field`, `$['odd.field']`, `$[0]`."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif any(c in part for c in ".'\"[]"):
            out.append(f"['{part}']")
        else:
            out.append(f".{part}")
    return "".join(out)


def _string_hash(text: str) -> int:
    data = text.encode("utf-16-be")  # Java hashes UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _INT
    return h


def _path_hash(path: Path) -> int:
    """Java's `ArrayList.hashCode` of the path's parts, each `Objects.hash(index or name)`."""
    h = 1
    for part in path:
        inner = part & _INT if isinstance(part, int) else _string_hash(part)
        h = (31 * h + 31 + inner) & _INT
    return h


class _JavaHashSet:
    """The iteration order of a `java.util.HashSet` of paths (a `HashMap` of 16 buckets doubling
    past three quarters full; a bucket lists its keys in insertion order, kept when it splits)."""

    def __init__(self) -> None:
        self._buckets: list[list[Path]] = [[] for _ in range(16)]
        self._size = 0

    def add(self, path: Path) -> None:
        h = _path_hash(path)
        bucket = self._buckets[(h ^ (h >> 16)) & (len(self._buckets) - 1)]
        if path in bucket:
            return
        bucket.append(path)
        self._size += 1
        if self._size > len(self._buckets) * 3 // 4:
            self._resize()

    def _resize(self) -> None:
        old, self._buckets = self._buckets, [[] for _ in range(2 * len(self._buckets))]
        for bucket in old:
            for path in bucket:
                h = _path_hash(path)
                self._buckets[(h ^ (h >> 16)) & (len(self._buckets) - 1)].append(path)

    def __iter__(self) -> Iterator[Path]:
        return (path for bucket in self._buckets for path in bucket)
