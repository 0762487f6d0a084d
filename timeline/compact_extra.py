"""A segment's other keys (the row facts a historical adds, and any Druid's tools add) as a broker
holds a million of them: read-only mappings, in the order the keys were announced, equal as
dicts are, but far smaller than a dict.

All-integer values (the row facts, nearly always) are packed into one `bytes` object: two bytes
naming the shared tuple of keys, then each value as a 64-bit integer. It weighs 64 B where a dict
of three weighs 190 B, and a small mapping object with a tuple of three int objects 210 B. Other
values keep a tuple beside the shared keys.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
_INT64 = struct.Struct("<q")
_INT64_RANGE = range(-(2**63), 2**63)
_KEYSET = struct.Struct("<H")
# each distinct key tuple once: packed mappings name theirs by its place here (bounded: beyond
# it, mappings keep a tuple of values as other values do)
_KEYSETS: list[tuple[str, ...]] = []
_KEYSET_PLACES: dict[tuple[str, ...], int] = {}


def compact_extra(extra: Mapping[str, Any]) -> Mapping[str, Any]:
    """`extra` as a compact read-only mapping."""
    if not extra:
        return NO_EXTRA
    keys, values = tuple(extra), tuple(extra.values())
    place = _KEYSET_PLACES.get(keys)
    if place is None and len(_KEYSETS) <= 0xFFFF:
        place = _KEYSET_PLACES[keys] = len(_KEYSETS)
        _KEYSETS.append(keys)
    if place is None:
        return TupleExtra(keys, values)
    if all(type(v) is int and v in _INT64_RANGE for v in values):  # not bools: they read back as bools
        return PackedExtra._of(_KEYSET.pack(place) + struct.pack(f"<{len(values)}q", *values))
    return TupleExtra(_KEYSETS[place], values)


class TupleExtra(Mapping[str, Any]):
    """Keys shared with every segment announced with the same ones, values in a tuple."""

    __slots__ = ("_keys", "_values")

    def __init__(self, keys: tuple[str, ...], values: tuple[Any, ...]):
        self._keys = keys
        self._values = values

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[self._keys.index(key)]
        except ValueError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TupleExtra) and self._keys is other._keys:
            return self._values == other._values
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # as a dict's

    def __repr__(self) -> str:
        return repr(dict(self))


class PackedExtra(bytes, Mapping[str, Any]):
    """All-integer values packed after their key tuple's place (see the module's doc). A `bytes`
    subclass so that the mapping and its values are one object, with no collector header."""

    __slots__ = ()

    @classmethod
    def _of(cls, data: bytes) -> PackedExtra:
        return bytes.__new__(cls, data)

    @property
    def _place(self) -> int:
        place: int = _KEYSET.unpack_from(self)[0]
        return place

    @property
    def _keys(self) -> tuple[str, ...]:
        return _KEYSETS[self._place]

    def __getitem__(self, key: str) -> Any:  # type: ignore[override]
        try:
            i = self._keys.index(key)
        except ValueError:
            raise KeyError(key) from None
        return _INT64.unpack_from(self, _KEYSET.size + 8 * i)[0]

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedExtra) and self._place == other._place:
            return bytes.__eq__(self, other)  # the same keys in the same order: the values' bytes
        return Mapping.__eq__(self, other)  # e.g. 1 and 1.0: packed the one, not the other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # as a dict's

    def __repr__(self) -> str:
        return repr(dict(self))
