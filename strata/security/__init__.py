"""Druid's security model for Strata: Basic authentication against users in the metadata store,
roles granting READ/WRITE on resources (DATASOURCE, STATE, CONFIG, SYSTEM_TABLE), an internal
identity for node-to-node calls, and one middleware per node that checks every request.

The pure parts (resources, passwords, model, policy, rate limit) do no I/O; `store` talks to the
database, `guard` keeps a node's snapshot current, `http` is the door.
"""
