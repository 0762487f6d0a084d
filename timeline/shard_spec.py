"""Shard specs (how a time chunk is split into partitions) and the partition chunks they make.

A chunk knows whether it starts or ends its partition set and whether it abuts the next one;
`PartitionHolder.is_complete` walks those rules, exactly as Druid's chunk types define them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PartitionChunk(Generic[T]):
    """One partition of a (interval, version) set holding an arbitrary object."""

    __slots__ = ("chunk_number", "object")

    def __init__(self, chunk_number: int, obj: T):
        self.chunk_number = chunk_number
        self.object = obj

    def is_start(self) -> bool:
        return True

    def is_end(self) -> bool:
        return True

    def abuts(self, other: PartitionChunk[Any]) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PartitionChunk)
            and type(other) is type(self)
            and other.chunk_number == self.chunk_number
            and other.object == self.object
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.chunk_number))

    # Ordered by chunk number (as Druid's compareTo); equality also needs the same object, as in
    # Druid's equals, so removing a chunk removes only the one holding that object.
    def __lt__(self, other: PartitionChunk[Any]) -> bool:
        return self.chunk_number < other.chunk_number

    def __le__(self, other: PartitionChunk[Any]) -> bool:
        return self.chunk_number <= other.chunk_number

    def __gt__(self, other: PartitionChunk[Any]) -> bool:
        return self.chunk_number > other.chunk_number

    def __ge__(self, other: PartitionChunk[Any]) -> bool:
        return self.chunk_number >= other.chunk_number

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.chunk_number}, {self.object!r})"


class SingleElementPartitionChunk(PartitionChunk[T]):
    """`none` shard spec: the only partition of its set."""

    __slots__ = ()


class LinearPartitionChunk(PartitionChunk[T]):
    """`linear` shard spec: any set of partitions is complete."""

    __slots__ = ()


class NumberedPartitionChunk(PartitionChunk[T]):
    """`numbered`/`hashed`: complete when core partitions 0..n-1 are all there (n=0: always)."""

    __slots__ = ("partitions",)

    def __init__(self, chunk_number: int, partitions: int, obj: T):
        super().__init__(chunk_number, obj)
        self.partitions = partitions

    def is_start(self) -> bool:
        return self.partitions == 0 or self.chunk_number == 0

    def is_end(self) -> bool:
        return self.partitions == 0 or self.chunk_number == self.partitions - 1

    def abuts(self, other: PartitionChunk[Any]) -> bool:
        return isinstance(other, NumberedPartitionChunk) and other.chunk_number == self.chunk_number + 1


class StringPartitionChunk(PartitionChunk[T]):
    """`single`/`range` without a core partition count: ranges of a dimension's values."""

    __slots__ = ("end", "start")

    def __init__(self, start: str | None, end: str | None, chunk_number: int, obj: T):
        super().__init__(chunk_number, obj)
        self.start = start
        self.end = end

    def is_start(self) -> bool:
        return self.start is None

    def is_end(self) -> bool:
        return self.end is None

    def abuts(self, other: PartitionChunk[Any]) -> bool:
        return isinstance(other, StringPartitionChunk) and other.start is not None and other.start == self.end


@dataclass(frozen=True)
class ShardSpec:
    """Druid's shardSpec JSON, kept whole, with the fields the timeline needs."""

    type: str
    partition_num: int = 0
    partitions: int | None = None  # core partition count for numbered-like specs
    start: str | None = None
    end: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def has_data(self) -> bool:
        return self.type != "tombstone"

    @classmethod
    def none(cls) -> ShardSpec:
        return cls("none", raw={"type": "none"})

    @classmethod
    def numbered(cls, partition_num: int, partitions: int) -> ShardSpec:
        raw = {"type": "numbered", "partitionNum": partition_num, "partitions": partitions}
        return cls("numbered", partition_num, partitions, raw=raw)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> ShardSpec:
        """Equal specs parse to one shared (immutable) object: a broker holding 100,000 segments
        holds a handful of distinct shard specs, not 100,000 copies of `{"type": "numbered", ...}`."""
        if obj is None:
            return _NONE
        try:
            # the value's type in the key too: 1, 1.0 and true are equal keys but print differently
            key = tuple(sorted((k, type(v).__name__, v) for k, v in obj.items()))
            shared = _INTERNED.get(key)
        except TypeError:  # a list value (a range spec's boundaries): parsed on its own
            return cls._parse(obj)
        if shared is None:
            shared = cls._parse(obj)
            if len(_INTERNED) < _INTERNED_MAX:
                _INTERNED[key] = shared
        return shared

    @classmethod
    def _parse(cls, obj: Mapping[str, Any]) -> ShardSpec:
        kind = obj.get("type")
        if kind == "none":
            return cls("none", raw=dict(obj))
        num = int(obj.get("partitionNum", 0))
        if kind in ("numbered", "hashed", "numbered_overwrite"):
            partitions = obj.get("partitions", obj.get("numCorePartitions", 0))
            return cls(kind, num, int(partitions or 0), raw=dict(obj))
        if kind == "linear":
            return cls("linear", num, raw=dict(obj))
        if kind in ("single", "range"):
            core = obj.get("numCorePartitions")
            start, end = obj.get("start"), obj.get("end")
            if kind == "range":
                start = _tuple_text(start)
                end = _tuple_text(end)
            return cls(kind, num, None if core is None or core < 0 else int(core), start, end, raw=dict(obj))
        if kind == "tombstone":
            return cls("tombstone", num, 1, raw=dict(obj))
        raise ValueError(f"unknown shardSpec type {kind!r}")

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw) if self.raw else {"type": self.type, "partitionNum": self.partition_num}

    def create_chunk(self, obj: T) -> PartitionChunk[T]:
        if self.type == "none":
            return SingleElementPartitionChunk(0, obj)
        if self.type == "linear":
            return LinearPartitionChunk(self.partition_num, obj)
        if self.type in ("single", "range") and self.partitions is None:
            return StringPartitionChunk(self.start, self.end, self.partition_num, obj)
        return NumberedPartitionChunk(self.partition_num, self.partitions or 0, obj)


_INTERNED: dict[tuple[tuple[str, str, Any], ...], ShardSpec] = {}
_INTERNED_MAX = 65_536  # distinct specs kept; beyond that each parse makes its own object
_NONE = ShardSpec.none()


def _tuple_text(value: Any) -> Any:
    """A multi-dimension range boundary (Druid's StringTuple) as one comparable string; a null
    element is empty, so it sorts first as Druid's nulls do."""
    if not isinstance(value, list):
        return value
    return ",".join("" if v is None else str(v) for v in value)
