"""The `--deep-storage`, `--s3-endpoint` and `--s3-region` flags every command that opens deep storage takes.

Credentials are deliberately not flags: S3 access comes from the AWS chain (environment,
`~/.aws` files, instance metadata), so no secret shows in a process list or a shell history.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from strata.storage import DEFAULT_DEEP_STORAGE

if TYPE_CHECKING:  # loaded when used: `strata --help` builds every parser
    from strata.storage.deep_storage import DeepStorage


def add_deep_storage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deep-storage", default=DEFAULT_DEEP_STORAGE,
        help="deep storage: a directory, file://DIR or s3://BUCKET/PREFIX",
    )  # fmt: skip
    parser.add_argument(
        "--s3-endpoint", default=None, metavar="URL",
        help="S3-compatible endpoint, e.g. http://minio:9000 (path-style); default AWS",
    )  # fmt: skip
    parser.add_argument("--s3-region", default=None, help="S3 region (default from the AWS config)")


def deep_storage_from_args(args: argparse.Namespace) -> DeepStorage:
    """The deep storage the flags name (`DeepStorageError` for a URL it cannot use)."""
    from strata.storage import open_deep_storage

    return open_deep_storage(
        args.deep_storage,
        s3_endpoint=getattr(args, "s3_endpoint", None),
        s3_region=getattr(args, "s3_region", None),
    )
