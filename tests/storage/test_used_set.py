"""UsedSet against a plain dict: any sequence of changes leaves the same segments, in id order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from strata.storage.used_set import UsedSet
from tests.storage.test_metadata_store import seg

SEGMENTS = [
    seg(f"2020-01-{d:02d}/2020-01-{d + 1:02d}", v, ds=ds)
    for d in range(1, 6)
    for v in ("v1", "v2")
    for ds in "ab"
]
changes = st.lists(
    st.tuples(st.sets(st.sampled_from(SEGMENTS), max_size=6), st.sets(st.sampled_from(SEGMENTS), max_size=6)),
    max_size=8,
)


@given(st.sets(st.sampled_from(SEGMENTS)), changes)
def test_changes_in_place_equal_a_fresh_sort(initial, steps):
    used = UsedSet(initial)
    oracle = {s.id: s for s in initial}
    for removed, added in steps:
        touched = {s.id for s in removed} | {s.id for s in added}
        used.apply(touched, added)
        for sid in touched:
            oracle.pop(sid, None)
        oracle.update({s.id: s for s in added})
        assert used.listed() == [oracle[k] for k in sorted(oracle)]
        assert used.listed("a") == [oracle[k] for k in sorted(oracle) if oracle[k].data_source == "a"]
    listed = used.listed()
    listed.clear()
    assert len(used) == len(oracle)
