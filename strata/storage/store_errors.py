"""The metadata store's error, in a module of its own: the store's interface and its schema
migrations both raise it, and neither may import the other."""

from __future__ import annotations


class MetadataStoreError(RuntimeError):
    """The store cannot be opened or a change to it was refused."""
