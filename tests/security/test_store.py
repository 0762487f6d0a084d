"""The credentials and roles store on SQLite (the metadata store's file): changes, versions,
initial users, and never a password at rest."""

from __future__ import annotations

import pytest

from security.model import ADMIN_ROLE, INTERNAL_USER
from security.passwords import Credentials, verify_password
from security.resources import Action, Permission, datasource
from security.store import AlreadyExists, NotFound, open_security_store
from storage import open_metadata_store


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    """One contract, both databases: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "metadata.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(location):
    s = open_security_store(location)
    yield s
    s.close()


def test_users_roles_and_grants(store, location, tmp_path):
    v0 = store.version()
    store.create_user("alice")
    store.set_password("alice", "alice-secret-1")
    store.create_role("wiki")
    store.set_permissions("wiki", [Permission.of("wikipedia", "DATASOURCE", "READ")])
    store.assign("alice", "wiki")
    store.assign("alice", "wiki")  # twice is once
    snap = store.snapshot()
    assert snap.version > v0
    assert verify_password("alice-secret-1", snap.credentials["alice"])
    assert snap.allows("alice", datasource("wikipedia"), Action.READ)
    store.unassign("alice", "wiki")
    assert not store.snapshot().allows("alice", datasource("wikipedia"), Action.READ)
    with pytest.raises(AlreadyExists):
        store.create_user("alice")
    with pytest.raises(NotFound):
        store.assign("alice", "nope")
    with pytest.raises(NotFound):
        store.set_password("nobody", "x")
    store.delete_role("wiki")
    store.delete_user("alice")
    assert "alice" not in store.snapshot().credentials
    if location.endswith(".db"):
        assert b"alice-secret-1" not in (tmp_path / "metadata.db").read_bytes()


def test_initial_users_once_and_beside_the_segments(location):
    path = location
    segments = open_metadata_store(path)  # the same file keeps its segments table
    store = open_security_store(path)
    store.ensure_initial("admin-pw-1", "internal-pw-1")
    store.ensure_initial("admin-pw-2", "internal-pw-2")  # initial passwords apply once
    snap = store.snapshot()
    assert verify_password("admin-pw-1", _set(snap.credentials["admin"]))
    assert verify_password("internal-pw-1", _set(snap.credentials[INTERNAL_USER]))
    assert snap.user_roles["admin"] == {ADMIN_ROLE}
    assert snap.allows(INTERNAL_USER, datasource("anything"), Action.WRITE)
    assert segments.data_sources() == []
    other = open_security_store(path)  # another node sees the same version
    assert other.version() == store.version()
    other.close()
    store.close()
    segments.close()


def _set(credentials: Credentials | None) -> Credentials:
    assert credentials is not None, "no password set"
    return credentials
