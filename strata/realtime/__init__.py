"""`strata realtime`: push ingestion into live segments, queries over them, durable exactly-once
acknowledgement (write-ahead log), intermediate persists and handoff to deep storage."""
