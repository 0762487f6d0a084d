"""A Spark task's scan asked of the data nodes serving its segments, not of the broker.

The broker knows which historical serves each segment and says so in its `candidates` listing;
asking those historicals directly spares every row a second hop and the broker's re-encoding,
and spreads a large read over the data nodes. A task groups its segments by the first node
serving each and sends each node scans of exactly its segments, each of at most
`MAX_REQUEST_BYTES` of segment files (a few segments), a second request in flight while the
first is read. Small requests keep the node reading while Spark converts an earlier answer
(large ones left the cores to one side, then the other) and bound what both hold at once: a 5M
row read took about 20% less CPU on the nodes and in Spark's JVM with 8 MB than with 64 MB.
A node answers with Arrow partials, read whole before any row is used, so whatever goes wrong
falls back to the broker without repeating rows: a node that cannot be reached, refuses or
breaks off has its segments asked of the broker (which retries other replicas), and so do the
segments a node says it no longer serves (`missingSegments`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from strata.spark.broker_client import BrokerClient, StrataError

DATA_NODE_TYPES = frozenset({"historical", "bridge"})  # serve published, immutable segments
MAX_REQUEST_BYTES = 8 << 20  # segment file bytes asked of a node in one request
IN_FLIGHT = 2  # node requests running while the task reads an earlier answer
BATCH_ROWS = 65_536  # rows per batch handed to Spark: its JVM converts one while the next is sent

log = logging.getLogger(__name__)

Descriptor = dict[str, Any]
NodeAnswer = tuple[pa.Table | None, list[Descriptor]]


def node_requests(
    segments: Sequence[Descriptor], servers: Sequence[Sequence[str]], sizes: Sequence[int]
) -> tuple[list[tuple[str, list[Descriptor]]], list[Descriptor]]:
    """(node URL, its segments) per request, and the segments no data node serves."""
    by_node: dict[str, list[tuple[Descriptor, int]]] = {}
    unserved: list[Descriptor] = []
    for descriptor, urls, size in zip(segments, servers, sizes, strict=True):
        if urls:
            by_node.setdefault(urls[0], []).append((descriptor, size))
        else:
            unserved.append(descriptor)
    requests: list[tuple[str, list[Descriptor]]] = []
    for url, held in by_node.items():
        batch: list[Descriptor] = []
        total = 0
        for descriptor, size in held:
            if batch and total + size > MAX_REQUEST_BYTES:
                requests.append((url, batch))
                batch, total = [], 0
            batch.append(descriptor)
            total += size
        requests.append((url, batch))
    return requests, unserved


def read_from_nodes(
    broker: BrokerClient,
    segments: Sequence[Descriptor],
    servers: Sequence[Sequence[str]],
    sizes: Sequence[int],
    scan_query: Callable[[list[Descriptor]], dict[str, Any]],
) -> Iterator[pa.RecordBatch]:
    """The scan's batches: from the data nodes, then from the broker for whatever they did not answer."""
    requests, fallback = node_requests(segments, servers, sizes)

    def ask(url: str, held: list[Descriptor]) -> NodeAnswer:
        return BrokerClient(url, broker.timeout_s, role="data node").node_scan(scan_query(held))

    pool = ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="strata-node")
    pending: list[tuple[Future[NodeAnswer], list[Descriptor]]] = []
    try:
        queue = list(requests)
        while queue or pending:
            while queue and len(pending) < IN_FLIGHT:
                url, held = queue.pop(0)
                pending.append((pool.submit(ask, url, held), held))
            future, held = pending.pop(0)
            try:
                table, missing = future.result()
            except StrataError as e:
                log.warning("%s; asking the broker for its %d segment(s)", e, len(held))
                fallback.extend(held)
                continue
            fallback.extend(missing)
            if table is not None:
                yield from table.to_batches(max_chunksize=BATCH_ROWS)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if fallback:
        yield from broker.scan_batches(scan_query(fallback))
