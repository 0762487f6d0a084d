"""The credentials and roles store on SQLite (the metadata store's file): changes, versions,
initial users, and never a password at rest."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from strata.security.model import ADMIN_ROLE, INTERNAL_USER
from strata.security.passwords import Credentials, verify_password
from strata.security.resources import Action, Permission, datasource
from strata.security.store import AlreadyExists, NotFound, open_security_store
from strata.storage import open_metadata_store


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


def test_nodes_starting_together_each_see_the_initial_users_whole(location):
    """Every node creates the initial users at start; whichever wins, each node's first snapshot
    (read right after its own `ensure_initial`) already holds both users with their passwords and
    the admin role. Before, a node could read a user created but not yet given its password."""
    nodes = 6
    for attempt in range(4):
        stores = [open_security_store(location) for _ in range(nodes)]
        if attempt:  # a fresh start each round: no users, no role
            with stores[0]._change() as cur:
                for table in ("strata_auth_user_roles", "strata_auth_users", "strata_auth_roles"):
                    cur.execute(f"DELETE FROM {table}")
        barrier = threading.Barrier(nodes)

        def start(store, barrier=barrier):
            barrier.wait(timeout=30)
            store.ensure_initial("admin-pw", "internal-pw")
            return store.snapshot()

        with ThreadPoolExecutor(nodes) as pool:
            snapshots = list(pool.map(start, stores, timeout=60))
        for snap in snapshots:
            assert verify_password("internal-pw", _set(snap.credentials[INTERNAL_USER]))
            assert snap.allows(INTERNAL_USER, datasource("wikipedia"), Action.READ)
            assert snap.user_roles["admin"] == {ADMIN_ROLE}
        for store in stores:
            store.close()


def test_racing_changes_from_two_nodes_all_land(location):
    """Two nodes changing users at once: both changes land, neither fails with a serialisation
    error (PostgreSQL would raise one for two REPEATABLE READ writers of the version row)."""
    stores = [open_security_store(location) for _ in range(2)]
    barrier = threading.Barrier(2)

    def create(args):
        store, prefix = args
        barrier.wait(timeout=30)
        for i in range(20):
            store.create_role(f"{prefix}{i}")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(create, [(stores[0], "a"), (stores[1], "b")], timeout=60))
    roles = stores[0].snapshot().roles
    assert {f"{p}{i}" for p in "ab" for i in range(20)} <= set(roles)
    for store in stores:
        store.close()
