import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cache import CacheKey, CompressedCache, LruCache, ValueCodec
from cache.codec import CODEC_IDS, CodecError, available_codec


@pytest.mark.parametrize("name", ["zstd", "lz4", "none"])
@settings(max_examples=60, deadline=None)
@given(
    value=st.binary(max_size=5000)
    | st.builds(lambda n, b: b * n, st.integers(0, 3000), st.binary(min_size=1, max_size=8))
)
def test_round_trip(name, value):
    codec = ValueCodec(name)
    assert codec.decode(codec.encode(value)) == value


def test_header_names_codec_and_raw_length():
    value = b"abcdefgh" * 1000
    encoded = ValueCodec("zstd").encode(value)
    codec_id, raw_len = struct.unpack(">BI", encoded[:5])
    assert (codec_id, raw_len) == (CODEC_IDS["zstd"], len(value))
    assert len(encoded) < len(value) // 10


def test_incompressible_and_tiny_values_are_stored_raw():
    noise = os.urandom(4096)
    for value in (noise, b"tiny"):
        encoded = ValueCodec("zstd").encode(value)
        assert encoded[0] == 0
        assert encoded[5:] == value


def test_any_reader_decodes_any_writer():
    value = b"segment partial " * 500
    for writer in ("zstd", "lz4", "none"):
        for reader in ("zstd", "lz4", "none"):
            assert ValueCodec(reader).decode(ValueCodec(writer).encode(value)) == value


@pytest.mark.parametrize(
    "damaged",
    [
        b"",
        b"\x01\x00",
        b"\x09\x00\x00\x00\x03abc",
        b"\x00\x00\x00\x00\x09abc",
        b"\x01\x00\x00\x10\x00garbage!",
    ],
)
def test_damaged_values_raise_codec_error(damaged):
    with pytest.raises(CodecError):
        ValueCodec("zstd").decode(damaged)


def test_unknown_codec_name_is_rejected():
    with pytest.raises(ValueError, match="unknown cache codec"):
        ValueCodec("bzip9")
    assert available_codec("none") == "none"


def test_compressed_cache_stores_less_and_reads_back():
    inner = LruCache(10_000_000)
    cache = CompressedCache(inner, ValueCodec("zstd"))
    key = CacheKey("seg", b"q")
    value = b"country=US;count=1;" * 2000
    cache.put_many({key: value})
    assert cache.get_many([key]) == {key: value}
    assert inner.stats().bytes < len(value) // 10


def test_compressed_cache_reads_damaged_value_as_miss():
    inner = LruCache(10_000_000)
    cache = CompressedCache(inner, ValueCodec("zstd"))
    good, bad = CacheKey("seg", b"good"), CacheKey("seg", b"bad")
    cache.put_many({good: b"fine"})
    inner.put_many({bad: b"\x07not a codec"})
    assert cache.get_many([good, bad]) == {good: b"fine"}
    s = cache.stats()
    assert (s.hits, s.misses, s.errors) == (1, 1, 1)
