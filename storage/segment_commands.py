"""`strata segments cleanup`: the action that deletes from deep storage."""

from __future__ import annotations

import argparse
import sys

from storage.deep_storage import DeepStorage, DeepStorageError
from storage.deep_storage_flags import deep_storage_from_args
from storage.metadata_store import MetadataStore
from storage.segment_cleanup import delete_objects, find_orphans


def run_deep_storage_action(args: argparse.Namespace, store: MetadataStore) -> int:
    try:
        deep = deep_storage_from_args(args)
        return _cleanup(args, store, deep)
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
