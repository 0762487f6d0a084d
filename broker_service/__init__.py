"""The broker: server inventory, per-datasource timelines, scatter/gather, merge, the public Druid API."""
