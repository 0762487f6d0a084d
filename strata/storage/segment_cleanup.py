"""What `strata segments cleanup` and `kill` remove from deep storage: decisions apart from the deleting.

An object is an orphan when no metadata row (used or unused) names it: the pushes of an ingestion
that died before its publish, a task attempt Spark retried, a staging leftover. Objects younger
than `min_age_s` are kept, since a running ingestion's pushes are not published yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from strata.storage.deep_storage import DeepStorage, DeepStorageError, StoredObject, age_s
from timeline import DataSegment

DEFAULT_MIN_AGE_S = 3600.0


@dataclass(frozen=True)
class Orphans:
    objects: list[StoredObject]
    named: int  # locations the metadata store names
    kept_young: int  # orphans left because they are younger than the minimum age

    @property
    def bytes(self) -> int:
        return sum(o.size for o in self.objects)


def find_orphans(deep: DeepStorage, segments: Iterable[DataSegment], min_age_s: float) -> Orphans:
    """Stored objects no segment's loadSpec names and older than `min_age_s`."""
    named: set[str] = set()
    for seg in segments:
        try:
            named.add(deep.location_of(seg))
        except DeepStorageError:  # a row for another deep storage: it names nothing here
            continue
    unnamed = [o for o in deep.stored() if o.location not in named]
    old = [o for o in unnamed if age_s(o) >= min_age_s]
    return Orphans(old, len(named), len(unnamed) - len(old))


def delete_objects(deep: DeepStorage, objects: Iterable[StoredObject]) -> int:
    """Delete each object; returns how many went."""
    count = 0
    for obj in objects:
        deep.delete_location(obj.location)
        count += 1
    return count
