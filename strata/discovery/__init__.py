"""Shapes both sides of segment discovery share: ZooKeeper paths, server metadata, batch znodes,
the HTTP change feed's snapshot, and a kazoo client with settings that survive outages.

Pure except `zk_client`, which only builds (never starts) a kazoo client.
"""

from strata.discovery.batches import (
    MAX_BYTES_PER_NODE,
    SEGMENTS_PER_NODE,
    BatchLimits,
    batch_znode_name,
    encode_batch,
    encode_segment,
    parse_batch,
)
from strata.discovery.change_requests import ChangeCounter, ChangeRequest, ChangeRequestsSnapshot
from strata.discovery.paths import ZkPaths
from strata.discovery.server_metadata import ServerMetadata, ServerType
from strata.discovery.zk_client import make_kazoo_client

__all__ = [
    "MAX_BYTES_PER_NODE",
    "SEGMENTS_PER_NODE",
    "BatchLimits",
    "ChangeCounter",
    "ChangeRequest",
    "ChangeRequestsSnapshot",
    "ServerMetadata",
    "ServerType",
    "ZkPaths",
    "batch_znode_name",
    "encode_batch",
    "encode_segment",
    "make_kazoo_client",
    "parse_batch",
]
