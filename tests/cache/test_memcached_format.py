import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cache import CacheKey
from cache.memcached_format import frame, memcached_key, unframe, validate_prefix

LONG_UNICODE_NS = "wikipedia_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_v1_" * 20 + "ünïcødé_日本語_🚀"


def test_key_is_druids_scheme():
    key = CacheKey("wiki_2015_v1", b"\x00\x01query")
    expected = (
        "druid:"
        + hashlib.sha1(b"wiki_2015_v1").hexdigest()
        + ":"
        + hashlib.sha1(b"\x00\x01query").hexdigest()
    )
    assert memcached_key("druid", key) == expected


@given(ns=st.text(max_size=3000), raw=st.binary(max_size=3000))
def test_any_namespace_gives_a_legal_memcached_key(ns, raw):
    mkey = memcached_key("strata", CacheKey(ns, raw))
    assert len(mkey) <= 250
    assert mkey.isascii() and " " not in mkey and "\n" not in mkey and "\r" not in mkey


def test_long_unicode_namespace_key():
    mkey = memcached_key("strata", CacheKey(LONG_UNICODE_NS, b"k"))
    assert len(mkey) == len("strata") + 2 + 80
    assert mkey.split(":")[1] == hashlib.sha1(LONG_UNICODE_NS.encode("utf-8")).hexdigest()


def test_frame_layout_by_hand():
    ns, key, value = "seg☃", b"\x01\x02", b"VALUE"
    ns_bytes = ns.encode("utf-8")
    named = struct.pack(">i", len(ns_bytes)) + ns_bytes + key
    assert frame(CacheKey(ns, key), value) == struct.pack(">i", len(named)) + named + value


@given(ns=st.text(max_size=50), raw=st.binary(max_size=50), value=st.binary(max_size=200))
def test_unframe_inverts_frame(ns, raw, value):
    key = CacheKey(ns, raw)
    assert unframe(key, frame(key, value)) == value


def test_unframe_refuses_another_keys_entry():
    a, b = CacheKey("seg", b"a"), CacheKey("seg", b"b")
    assert unframe(a, frame(b, b"B's value")) is None
    # same bytes split differently between namespace and key must not match either
    assert unframe(CacheKey("se", b"ga"), frame(CacheKey("seg", b"a"), b"v")) is None


@pytest.mark.parametrize("junk", [b"", b"\x00\x00", b"\xff\xff\xff\xffxx", b"\x00\x00\x01\x00short"])
def test_unframe_refuses_junk(junk):
    assert unframe(CacheKey("seg", b"a"), junk) is None


@pytest.mark.parametrize("bad", ["", "has space", "tab\t", "x" * 200, "ünï"])
def test_bad_prefixes_are_rejected(bad):
    with pytest.raises(ValueError, match="prefix"):
        validate_prefix(bad)
