"""`strata segments kill` and `cleanup`: the two actions that delete from deep storage."""

from __future__ import annotations

import argparse
import sys

from strata.storage.deep_storage import DeepStorage, DeepStorageError
from strata.storage.deep_storage_flags import deep_storage_from_args
from strata.storage.metadata_store import MetadataStore, SegmentRecord
from strata.storage.segment_cleanup import delete_objects, find_orphans
from timeline import Interval


def run_deep_storage_action(args: argparse.Namespace, store: MetadataStore) -> int:
    try:
        deep = deep_storage_from_args(args)
        if args.action == "cleanup":
            return _cleanup(args, store, deep)
        return _kill(args, store, deep)
    except (DeepStorageError, OSError, ValueError) as e:
        print(f"strata segments: error: {e}", file=sys.stderr)
        return 1


def _cleanup(args: argparse.Namespace, store: MetadataStore, deep: DeepStorage) -> int:
    found = find_orphans(deep, (r.segment for r in store.segments(include_unused=True)), args.min_age)
    for obj in found.objects:
        print(f"{'deleting' if args.apply else 'would delete'} {obj.location} ({obj.size:,} B)")
    if args.apply:
        head = f"deleted {delete_objects(deep, found.objects)} object(s)"
    else:
        head = f"{len(found.objects)} object(s) to delete (dry run: --apply deletes them)"
    print(f"{head}, {found.bytes:,} B that no metadata row names; "
          f"{found.kept_young} younger than {args.min_age:g}s left alone")  # fmt: skip
    return 0


def _kill(args: argparse.Namespace, store: MetadataStore, deep: DeepStorage) -> int:
    """Unused segments named by id, or of `--datasource` [`--interval`]: objects, then rows."""
    interval = Interval.parse(args.interval) if args.interval else None
    records = [
        r for r in store.segments(args.datasource, include_unused=True)
        if interval is None or r.segment.interval.overlaps(interval)
    ]  # fmt: skip
    if args.ids:
        by_id = {r.segment.id: r for r in records}
        missing = [i for i in args.ids if i not in by_id]
        if missing:
            print(f"strata segments: error: no such segment: {', '.join(missing)}", file=sys.stderr)
            return 1
        chosen = [by_id[i] for i in args.ids]
    elif args.datasource:
        chosen = [r for r in records if not r.used]
    else:
        print("strata segments: error: name segment ids or --datasource [--interval]", file=sys.stderr)
        return 2
    used = [r.segment.id for r in chosen if r.used]
    if used:
        print(f"strata segments: error: {', '.join(used)} still used: drop them first", file=sys.stderr)
        return 1
    killed = kill_segments(store, deep, chosen)
    print(f"{killed} unused segment(s) killed (objects and rows deleted)")
    return 0


def kill_segments(store: MetadataStore, deep: DeepStorage, records: list[SegmentRecord]) -> int:
    """Delete the segments' objects, then their rows: a failure part-way leaves rows (unused) whose
    kill can simply run again, never an object no row names. An object another row also names (a
    compaction's upgraded copy of an appended segment shares its file) stays."""
    killed = {r.segment.id for r in records}
    sources = {r.segment.data_source for r in records}
    shared = {
        deep.location_of(o.segment)
        for ds in sources
        for o in store.segments(ds, include_unused=True)
        if o.segment.id not in killed and o.segment.load_spec
    }
    for r in records:
        if deep.location_of(r.segment) not in shared:
            deep.delete(r.segment)
    return store.delete_unused([r.segment.id for r in records])
