"""What a broker holding 100,000 segments shares or leaves out changes no value: the compact parse,
shared shard specs and column lists, and un-memoised interval text equal the plain paths."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from timeline import DataSegment, Interval, ShardSpec
from timeline.compact_extra import PackedExtra, compact_extra
from timeline.interval import ETERNITY

MS = st.integers(-(2**40), 2**42)


@given(MS, st.integers(1, 2**36))
def test_unshared_interval_text_and_parse_equal_the_memoised_ones(start: int, length: int) -> None:
    interval = Interval(start, start + length)
    assert interval.text_unshared() == str(interval)
    assert Interval.parse_unshared(str(interval)) == Interval.parse(str(interval)) == interval
    assert ETERNITY.text_unshared() == str(ETERNITY)
    # a segment's id from its interval's text as read equals the one printed from the interval
    for text in (str(interval), interval.text_unshared().replace("Z", "+00:00")):
        obj = {"dataSource": "d", "interval": text, "version": "v"}
        for segment in (DataSegment.from_json(obj), DataSegment.from_json(obj, compact=True)):
            assert segment.id == f"d_{str(interval).replace('/', '_')}_v"


def test_an_interval_read_at_24_00_is_named_as_the_next_day() -> None:
    obj = {"dataSource": "d", "interval": "2015-01-01T24:00:00.000Z/2015-01-03T00:00:00.000Z", "version": "v"}
    assert (
        DataSegment.from_json(obj, compact=True).id == "d_2015-01-02T00:00:00.000Z_2015-01-03T00:00:00.000Z_v"
    )


shard_specs = st.one_of(
    st.none(),
    st.just({"type": "none"}),
    st.builds(lambda n, k: {"type": "numbered", "partitionNum": n, "partitions": k}, st.integers(0, 3), st.integers(0, 4)),
    st.builds(lambda n: {"type": "linear", "partitionNum": n}, st.integers(0, 3)),
    st.builds(lambda n, s: {"type": "single", "partitionNum": n, "start": s, "end": None, "dimension": "d"},
              st.integers(0, 3), st.one_of(st.none(), st.text(max_size=3))),
    st.builds(lambda s: {"type": "range", "partitionNum": 0, "start": s, "end": None, "dimensions": ["a", "b"]},
              st.one_of(st.none(), st.lists(st.one_of(st.none(), st.text(max_size=2)), max_size=2))),
    st.builds(lambda n: {"type": "numbered", "partitionNum": n, "partitions": True}, st.integers(0, 1)),
)  # fmt: skip
names = st.one_of(st.just(""), st.lists(st.sampled_from(["a", "b", "page", "x y"]), max_size=3).map(",".join))


@settings(max_examples=300)
@given(
    shard_specs,
    shard_specs,
    names,
    names,
    MS,
    st.integers(1, 2**30),
    st.dictionaries(st.sampled_from(["numRows", "minTime", "x"]), st.integers(0, 9)),
)
def test_compact_segments_equal_plain_ones_but_for_the_load_spec(
    spec: Any, other: Any, dims: str, metrics: str, start: int, length: int, extra: dict[str, int]
) -> None:
    interval = Interval(start, start + length)
    obj = {"dataSource": "wiki", "interval": str(interval), "version": "v1", "dimensions": dims,
           "metrics": metrics, "shardSpec": spec, "loadSpec": {"type": "local", "path": "/p"}, **extra}  # fmt: skip
    plain, compact = DataSegment.from_json(obj), DataSegment.from_json(obj, compact=True)
    assert compact == plain and compact.id == plain.id
    assert (compact.dimensions, compact.metrics, compact.extra) == (
        plain.dimensions,
        plain.metrics,
        plain.extra,
    )
    assert list(compact.extra.items()) == list(plain.extra.items()) and compact.extra == plain.extra
    assert plain.same_announcement(DataSegment.from_json(obj)) and compact.same_announcement(
        DataSegment.from_json(obj, compact=True)
    )
    assert compact.extra.get("absent") is None and "absent" not in compact.extra
    assert compact.interval is DataSegment.from_json(obj, compact=True).interval  # one shared object
    assert compact.shard_spec.to_json() == plain.shard_spec.to_json()
    assert dict(compact.load_spec) == {} and plain.load_spec == {"type": "local", "path": "/p"}
    assert plain.to_json() == {**compact.to_json(), "loadSpec": {"type": "local", "path": "/p"}}
    # shared objects are equal to what a fresh parse of their JSON gives, whatever was parsed before
    ShardSpec.from_json(other)
    assert ShardSpec.from_json(spec) == ShardSpec._parse(spec) if spec is not None else True
    assert DataSegment.from_json({**obj, "shardSpec": spec}).shard_spec.to_json() == (
        ShardSpec._parse(spec).to_json() if spec is not None else ShardSpec.none().to_json()
    )


extra_values = st.one_of(
    st.integers(-(2**70), 2**70), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none(),
    st.floats(allow_nan=False), st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2),
)  # fmt: skip


@settings(max_examples=300, deadline=None)  # timing is not what it checks (a busy CI)
@given(st.dictionaries(st.sampled_from(["numRows", "minTime", "maxTime", "x"]), extra_values), st.data())
def test_compact_extra_keys_read_back_as_announced_packed_or_not(extra: dict[str, Any], data: Any) -> None:
    """Integer row facts are packed; each value reads back as a plain dict holds it (type too),
    and equality is a dict's, whether both, one or neither side was packed (1 == 1.0 == True)."""
    obj = {"dataSource": "d", "interval": "2015-01-01T00:00:00.000Z/2015-01-01T01:00:00.000Z", "version": "v"}
    compact = DataSegment.from_json({**obj, **extra}, compact=True).extra
    assert [(k, type(v), v) for k, v in compact.items()] == [(k, type(v), v) for k, v in extra.items()]
    assert len(compact) == len(extra) and all(compact[k] == v for k, v in extra.items())
    other = data.draw(
        st.fixed_dictionaries({k: st.sampled_from([v, 1, 1.0, True, 2**64, "1"]) for k, v in extra.items()})
    )
    other_compact = DataSegment.from_json({**obj, **other}, compact=True).extra
    assert (compact == other_compact) == (extra == other) == (other_compact == compact)
    assert (compact == other) == (extra == other)


def test_packed_row_facts_behave_as_the_dict_they_came_from() -> None:
    facts = {"numRows": 1_042, "minTime": -5, "maxTime": 2**63 - 1}
    packed = compact_extra(facts)
    one_object = packed  # (checked apart: mypy would read `packed` as bytes after the isinstance)
    assert isinstance(one_object, PackedExtra) and len(bytes(one_object)) == 2 + 8 * 3
    assert dict(packed) == {**packed} == facts and list(packed.items()) == list(facts.items())
    assert "numRows" in packed and "x" not in packed and packed.get("x") is None and len(packed) == 3
    assert pickle.loads(pickle.dumps(packed)) == facts and copy.deepcopy(packed) == packed
    reordered = compact_extra(dict(reversed(facts.items())))
    assert reordered == packed and packed == reordered and list(reordered) != list(packed)
    assert packed != compact_extra({**facts, "numRows": 1_043}) and packed != {**facts, "x": 1}
    assert compact_extra({**facts, "numRows": 1_042.0}) == packed and repr(packed) == repr(facts)
    assert not isinstance(compact_extra({"numRows": True}), PackedExtra)
