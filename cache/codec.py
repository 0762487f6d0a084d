"""Value compression with a self-describing header, so a reader never needs to know the writer's setting.

Layout: `[codec id: 1 byte][raw length: uint32 BE][payload]`. Values that are tiny or that do not
shrink (already-compressed Arrow IPC, for instance) are stored raw under id 0, so enabling the codec
never makes a value bigger than 5 bytes over its raw size. Codecs come from pyarrow (`pa.Codec`).
"""

from __future__ import annotations

import struct

import pyarrow as pa

CODEC_IDS = {"none": 0, "zstd": 1, "lz4": 2}
_NAMES = {v: k for k, v in CODEC_IDS.items()}
_HEADER = struct.Struct(">BI")
MIN_COMPRESS_SIZE = 256


class CodecError(ValueError):
    """A stored value whose header is damaged or names a codec this process cannot decode."""


def available_codec(preferred: str = "zstd") -> str:
    """`preferred` if this pyarrow build has it, else the first other that it has, else "none"."""
    for name in (preferred, "zstd", "lz4"):
        if name == "none" or (name in CODEC_IDS and pa.Codec.is_available(name)):
            return name
    return "none"


class ValueCodec:
    def __init__(self, name: str = "zstd", level: int | None = None, min_size: int = MIN_COMPRESS_SIZE):
        if name not in CODEC_IDS:
            raise ValueError(f"unknown cache codec {name!r}; expected one of {sorted(CODEC_IDS)}")
        self.name = available_codec(name)
        self.min_size = min_size
        self._codec = None if self.name == "none" else pa.Codec(self.name, compression_level=level)
        self._decoders: dict[int, pa.Codec] = {}

    def encode(self, value: bytes) -> bytes:
        if self._codec is not None and len(value) >= self.min_size:
            packed = self._codec.compress(value, asbytes=True)
            if len(packed) < len(value):
                return _HEADER.pack(CODEC_IDS[self.name], len(value)) + packed
        return _HEADER.pack(0, len(value)) + value

    def decode(self, data: bytes) -> bytes:
        if len(data) < _HEADER.size:
            raise CodecError(f"cached value too short for its header ({len(data)} bytes)")
        codec_id, raw_len = _HEADER.unpack_from(data)
        payload = memoryview(data)[_HEADER.size :]
        if codec_id == 0:
            if len(payload) != raw_len:
                raise CodecError(f"raw cached value is {len(payload)} bytes, header says {raw_len}")
            return bytes(payload)
        try:
            raw = self._decoder(codec_id).decompress(payload, decompressed_size=raw_len, asbytes=True)
        except (pa.ArrowException, OSError) as e:
            raise CodecError(f"cannot decompress cached value: {e}") from None
        return bytes(raw)

    def _decoder(self, codec_id: int) -> pa.Codec:
        decoder = self._decoders.get(codec_id)
        if decoder is None:
            name = _NAMES.get(codec_id)
            if name is None or not pa.Codec.is_available(name):
                raise CodecError(f"cached value uses codec id {codec_id}, not available here")
            decoder = self._decoders[codec_id] = pa.Codec(name)
        return decoder
