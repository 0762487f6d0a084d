"""Query-time lookups (Druid's lookups): their configuration, loading and the loaded set."""
