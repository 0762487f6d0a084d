"""The Arrow memory pool ingestion allocates its column-sized buffers from.

Ingestion builds whole columns (decoded Parquet strings, gathered rows) that grow by reallocation.
Arrow's default mimalloc pool moves every grown block to fresh pages and hands freed ones back to
the OS, so each pass over 10M rows pays again in page faults (measured: most of the read time);
the C library allocator grows large blocks in place with mremap. Passed explicitly to the calls
that allocate most, so the process default stays what the rest of Strata expects.
"""

from __future__ import annotations

import pyarrow as pa

INGEST_POOL: pa.MemoryPool = pa.system_memory_pool()
