"""`strata security`: the same changes as the HTTP API, straight into the metadata store."""

from __future__ import annotations

import json

from strata.cli.main import main
from strata.security.passwords import verify_password
from strata.security.resources import Action, datasource
from strata.security.store import open_security_store


def test_users_roles_grants_and_passwords(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "metadata.db")

    def strata(*argv: str) -> int:
        return main(["security", "--metadata", db, *argv])

    monkeypatch.setenv("STRATA_NEW_PASSWORD", "alice-pw-from-env")
    assert strata("create-user", "alice") == 0
    assert strata("set-password", "alice") == 0
    assert strata("create-role", "wiki") == 0
    assert strata("grant", "wiki", "--type", "DATASOURCE", "--name", "wikipedia", "--action", "READ") == 0
    assert strata("assign", "alice", "wiki") == 0
    assert strata("create-user", "alice") == 1  # exists already
    assert "already exists" in capsys.readouterr().err
    assert strata("assign", "alice", "nope") == 1
    perms = tmp_path / "perms.json"
    perms.write_text(json.dumps([{"resource": {"name": ".*", "type": "STATE"}, "action": "READ"}]))
    assert strata("create-role", "ops") == 0
    assert strata("set-permissions", "ops", str(perms)) == 0
    capsys.readouterr()
    assert strata("users") == 0
    assert capsys.readouterr().out == "alice: wiki\n"
    store = open_security_store(db)
    snap = store.snapshot()
    store.close()
    credentials = snap.credentials["alice"]
    assert credentials is not None
    assert verify_password("alice-pw-from-env", credentials)
    assert snap.allows("alice", datasource("wikipedia"), Action.READ)
    assert not snap.allows("alice", datasource("wikipedia_live"), Action.READ)
    assert [p.to_json() for p in snap.roles["ops"]] == json.loads(perms.read_text())
