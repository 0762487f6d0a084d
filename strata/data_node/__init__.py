"""The serving core every data node shares: the set of served segments, the query API (native JSON
for plain clients, Arrow partials for the broker), announcing in ZooKeeper and the HTTP change feed,
status routes.

`historical_service` is this core plus loading from deep storage and assignment; `strata.realtime`
is this core plus ingestion and handoff. What every server process shares (the broker too) is
`strata.server`.
"""
