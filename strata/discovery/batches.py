"""Segment batch znodes (BatchDataSegmentAnnouncer): many segments per ephemeral znode, as a JSON
array of DataSegment, so a node with thousands of segments writes tens of znodes, not thousands.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from timeline import DataSegment

log = logging.getLogger(__name__)

SEGMENTS_PER_NODE = 50
MAX_BYTES_PER_NODE = 512 * 1024
_MIN_BYTES, _MAX_BYTES = 1024, 1024 * 1024


@dataclass(frozen=True, slots=True)
class BatchLimits:
    segments_per_node: int = SEGMENTS_PER_NODE
    max_bytes_per_node: int = MAX_BYTES_PER_NODE

    def __post_init__(self) -> None:
        if self.segments_per_node < 1:
            raise ValueError("segmentsPerNode must be at least 1")
        if not _MIN_BYTES <= self.max_bytes_per_node <= _MAX_BYTES:
            raise ValueError(f"maxBytesPerNode must be within [{_MIN_BYTES}, {_MAX_BYTES}]")


def encode_segment(segment: DataSegment) -> bytes:
    return orjson.dumps(segment.to_json())


def encode_batch(items: Iterable[bytes]) -> bytes:
    """A JSON array of already-encoded segments (its length is 2 + sum(len) + commas)."""
    return b"[" + b",".join(items) + b"]"


def batch_znode_name(
    server: str, server_type: str, tier: str, counter: int, now: datetime | None = None
) -> str:
    """`<host:port>_<type>_<tier>_<ISO now>_<uuid hex><counter>`, as Druid's UUIDUtils names them."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"{server}_{server_type}_{tier}_{stamp}_{uuid.uuid4().hex}{counter}"


def parse_batch(
    data: bytes | None, *, compact: bool = False, held: Callable[[str], DataSegment | None] | None = None
) -> list[DataSegment]:
    """Read a batch znode; malformed entries are skipped (logged) so one bad segment hides no others.
    `compact`: segments as a broker holds them (see DataSegment.from_json). `held`: the compact
    segment a reader already holds under an id, returned instead of a new one when this batch
    announces it exactly so (each further replica of a segment costs a comparison, not a parse)."""
    if not data:
        return []
    try:
        items = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"segment batch znode is not JSON: {e}") from None
    if not isinstance(items, list):
        raise ValueError("segment batch znode does not hold a JSON array")
    out = []
    for item in items:
        try:
            identifier = item.get("identifier") if compact and held and isinstance(item, dict) else None
            if isinstance(identifier, str) and held is not None:
                known = held(identifier)  # only where to look: `announced_as` decides
                if known is not None and known.announced_as(item):
                    out.append(known)
                    continue
            out.append(DataSegment.from_json(item, compact=compact))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            log.warning("skipping malformed segment in batch: %s", e)
    return out
