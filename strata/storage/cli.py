"""`strata segments list|drop|restore|kill|cleanup`: see and change which segments are used; `kill`
deletes unused segments for good (objects, then rows), `cleanup` the deep-storage objects no
metadata row names."""

from __future__ import annotations

import argparse
import sys

from strata.storage.deep_storage_flags import add_deep_storage_flags

DEFAULT_MIN_AGE_S = 3600.0  # storage.segment_cleanup's, kept here so `strata --help` stays light

HELP = "List segments in the metadata store, drop (mark unused), restore or kill them; clean up deep storage"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "drop", "restore", "kill", "cleanup"])
    parser.add_argument("ids", nargs="*", help="segment ids (drop/restore/kill)")
    parser.add_argument(
        "--metadata", default="var/metadata.db", help="SQLite file or postgresql://USER@HOST:PORT/DB"
    )
    parser.add_argument("--datasource", help="only this data source")
    parser.add_argument("--interval", help="only segments overlapping this ISO interval")
    parser.add_argument("--all", action="store_true", help="list: include unused segments")
    parser.add_argument("--json", action="store_true", help="list: print descriptor JSON lines")
    add_deep_storage_flags(parser)
    parser.add_argument("--apply", action="store_true", help="cleanup: delete (default: a dry run)")
    parser.add_argument(
        "--min-age", type=float, default=DEFAULT_MIN_AGE_S,
        help="cleanup: leave objects younger than this many seconds (a running ingestion's pushes)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import orjson

    from strata.storage import MetadataStoreError, open_metadata_store
    from timeline import Interval

    try:
        interval = Interval.parse(args.interval) if args.interval else None
        store = open_metadata_store(args.metadata)
    except (ValueError, MetadataStoreError) as e:
        print(f"strata segments: error: {e}", file=sys.stderr)
        return 1
    try:
        if args.action in ("kill", "cleanup"):
            from strata.storage.segment_commands import run_deep_storage_action

            return run_deep_storage_action(args, store)
        include_unused = args.all or args.action == "restore"
        records = [
            r for r in store.segments(args.datasource, include_unused=include_unused)
            if interval is None or r.segment.interval.overlaps(interval)
        ]  # fmt: skip
        if args.action == "list":
            if args.json:
                for r in records:
                    print(orjson.dumps({**r.segment.to_json(), "used": r.used}).decode())
                return 0
            from rich.console import Console
            from rich.table import Table

            table = Table("id", "used", "size", "created", title=f"{len(records)} segments")
            for r in records:
                table.add_row(
                    r.segment.id, "yes" if r.used else "no", f"{r.segment.size:,} B", r.created_date
                )
            Console().print(table)
            return 0
        if args.ids:
            ids = list(args.ids)
        elif args.datasource:
            ids = [r.segment.id for r in records if r.used == (args.action == "drop")]
        else:
            print("strata segments: error: name segment ids or --datasource [--interval]", file=sys.stderr)
            return 2
        changed = store.mark_unused(ids) if args.action == "drop" else store.mark_used(ids)
        verb = "dropped (marked unused)" if args.action == "drop" else "restored (marked used)"
        print(f"{changed} segment(s) {verb}")
        return 0
    finally:
        store.close()
