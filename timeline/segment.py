"""Segment identity in Druid's JSON shapes: `DataSegment` and `SegmentDescriptor`."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from timeline.compact_extra import compact_extra
from timeline.instant import prints_as_read
from timeline.interval import Interval
from timeline.shard_spec import ShardSpec

_KNOWN = {
    "dataSource", "interval", "version", "loadSpec", "dimensions", "metrics", "shardSpec",
    "binaryVersion", "size", "identifier", "id",
}  # fmt: skip


def _names(value: Any) -> tuple[str, ...]:
    """Druid writes dimensions/metrics comma-joined but reads a list too. Equal lists give one
    shared tuple: the segments of a datasource nearly always name the same columns."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        shared = _NAMES.get(value)
        if shared is None:
            shared = _share(value, tuple(sys.intern(v) for v in value.split(",") if v))
        return shared
    if isinstance(value, Sequence):
        names = tuple(sys.intern(str(v)) for v in value)
        return _NAMES.get(names) or _share(names, names)
    raise ValueError(f"expected a comma-joined string or a list, got {value!r}")


_NO_LOAD_SPEC: Mapping[str, Any] = MappingProxyType({})
_NAMES: dict[str | tuple[str, ...], tuple[str, ...]] = {}
_NAMES_MAX = 65_536
# a broker's segments share their intervals: ten datasources' hours are the same hours (bounded:
# beyond it each parse keeps its own, as before; an entry weighs a third of an unshared interval)
_INTERVALS: dict[Interval, Interval] = {}
_INTERVALS_MAX = 262_144


def _share(key: str | tuple[str, ...], names: tuple[str, ...]) -> tuple[str, ...]:
    if len(_NAMES) < _NAMES_MAX:
        _NAMES[key] = names
    return names


def _prints_as_read(text: Any) -> bool:
    if not isinstance(text, str) or len(text) != 49 or text[24] != "/":
        return False
    return prints_as_read(text[:24]) and prints_as_read(text[25:])


def _shared_interval(interval: Interval) -> Interval:
    shared = _INTERVALS.get(interval)
    if shared is None:
        if len(_INTERVALS) >= _INTERVALS_MAX:
            return interval
        shared = _INTERVALS[interval] = interval
    return shared


class SegmentDescriptor(NamedTuple):
    """What a broker names when it asks a data node for one segment (`itvl`, `ver`, `part`).
    A named tuple, not a frozen dataclass: routing makes one per segment of every query, and a
    frozen dataclass's field-by-field setattr made it a fifth of routing a one-day query."""

    interval: Interval
    version: str
    partition: int

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SegmentDescriptor:
        return cls(Interval.parse(obj["itvl"]), str(obj["ver"]), int(obj.get("part", 0)))

    def to_json(self) -> dict[str, Any]:
        return {"itvl": str(self.interval), "ver": self.version, "part": self.partition}


@dataclass(frozen=True, slots=True)
class DataSegment:
    data_source: str
    interval: Interval
    version: str
    load_spec: Mapping[str, Any] = field(default_factory=dict, compare=False)
    dimensions: tuple[str, ...] = field(default=(), compare=False)
    metrics: tuple[str, ...] = field(default=(), compare=False)
    shard_spec: ShardSpec = field(default_factory=ShardSpec.none)
    binary_version: int = field(default=9, compare=False)
    size: int = field(default=0, compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # the id, built once: a broker reads it for every segment of every query (cache keys, routing)
    _id: str = field(init=False, repr=False, compare=False)
    # the interval's text when the reader holds it exactly as it prints (saves printing it again:
    # a third of parsing a segment's JSON)
    interval_text: InitVar[str | None] = None

    def __post_init__(self, interval_text: str | None) -> None:
        text = interval_text if interval_text is not None else self.interval.text_unshared()
        base = f"{self.data_source}_{text.replace('/', '_')}_{self.version}"
        partition = self.shard_spec.partition_num
        object.__setattr__(self, "_id", base if partition == 0 else f"{base}_{partition}")

    def same_announcement(self, other: DataSegment) -> bool:
        """Equal in every field, not only in identity (`==` compares the id's parts alone)."""
        return self is other or (
            self == other
            and self.size == other.size
            and self.binary_version == other.binary_version
            and self.dimensions == other.dimensions
            and self.metrics == other.metrics
            and self.load_spec == other.load_spec
            and self.extra == other.extra
        )

    def announced_as(self, obj: Mapping[str, Any]) -> bool:
        """Would `from_json(obj, compact=True)` announce exactly this compact segment? Told without
        building it (a replica's announcement, met once per extra replica of each segment: a
        million of them), so False may also mean "could not tell cheaply": then parse it."""
        if self.load_spec is not _NO_LOAD_SPEC:
            return False  # only compact segments leave their load spec out
        try:
            data_source, text, version = obj["dataSource"], obj["interval"], obj["version"]
            if type(data_source) is not str or type(version) is not str or not _prints_as_read(text):
                return False
            # the id names the interval as it prints, and `text` is exactly such a print
            name = f"{data_source}_{text[:24]}_{text[25:]}_{version}"
            partition = self.shard_spec.partition_num
            return (
                self._id == (name if partition == 0 else f"{name}_{partition}")
                and self.data_source == data_source
                and self.version == version
                and ShardSpec.from_json(obj.get("shardSpec")) == self.shard_spec
                and int(obj.get("binaryVersion") or 9) == self.binary_version
                and int(obj.get("size") or 0) == self.size
                and _names(obj.get("dimensions")) == self.dimensions
                and _names(obj.get("metrics")) == self.metrics
                and compact_extra({k: v for k, v in obj.items() if k not in _KNOWN}) == self.extra
            )
        except (KeyError, ValueError, TypeError, AttributeError):
            return False

    @property
    def partition_num(self) -> int:
        return self.shard_spec.partition_num

    @property
    def id(self) -> str:
        """Druid's SegmentId: `dataSource_start_end_version[_partitionNum]` (partition 0 omitted)."""
        return self._id

    @property
    def descriptor(self) -> SegmentDescriptor:
        return SegmentDescriptor(self.interval, self.version, self.partition_num)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, compact: bool = False) -> DataSegment:
        """`compact`: as a broker holds 100,000 of them, without where its files lie (a broker never
        reads that, and the path is a tenth of what it holds per segment) and with its interval
        parsed apart from the shared text memo (whose entry would cost more than the segment's
        interval itself) but shared with other segments of the same interval, and its other keys
        in a compact read-only mapping."""
        try:
            text = obj["interval"]
            extra = {k: v for k, v in obj.items() if k not in _KNOWN}
            return cls(
                data_source=sys.intern(str(obj["dataSource"])),
                interval=_shared_interval(Interval.parse_unshared(text)) if compact else Interval.parse(text),
                version=sys.intern(str(obj["version"])),
                load_spec=_NO_LOAD_SPEC if compact else (obj.get("loadSpec") or {}),
                dimensions=_names(obj.get("dimensions")),
                metrics=_names(obj.get("metrics")),
                shard_spec=ShardSpec.from_json(obj.get("shardSpec")),
                binary_version=int(obj.get("binaryVersion") or 9),
                size=int(obj.get("size") or 0),
                extra=compact_extra(extra) if compact else extra,
                interval_text=text if _prints_as_read(text) else None,
            )
        except KeyError as e:
            raise ValueError(f"DataSegment JSON lacks required field {e.args[0]!r}") from None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dataSource": self.data_source,
            "interval": str(self.interval),
            "version": self.version,
            "loadSpec": dict(self.load_spec),
            "dimensions": ",".join(self.dimensions),
            "metrics": ",".join(self.metrics),
            "shardSpec": self.shard_spec.to_json(),
            "binaryVersion": self.binary_version,
            "size": self.size,
        }
        out.update(self.extra)
        out["identifier"] = self.id
        return out
