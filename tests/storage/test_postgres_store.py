"""What only the PostgreSQL store has: libpq's password sources, secrets kept out of messages,
notifications, and reads of only what changed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from contextlib import closing

import pytest

from harness.postgres import PostgresServer
from strata.storage import MetadataStoreError, open_metadata_store, redact_location
from strata.storage.metadata_url import scrub
from strata.storage.segments_schema import LOG_KEEP
from tests.storage.test_metadata_store import seg


def test_redaction_hides_every_form_of_password():
    assert redact_location("postgresql://u:p4ss@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_location("postgresql://u@h/db?password=p4ss&sslmode=require") == (
        "postgresql://u@h/db?password=***&sslmode=require"
    )
    assert redact_location("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_location("var/metadata.db") == "var/metadata.db"
    url = "postgresql://u:p4ss@h/db"
    assert "p4ss" not in scrub(f"could not reach {url}: password p4ss rejected", url)


def test_password_from_pgpassword_and_never_in_errors(
    postgres_server: PostgresServer, postgres_url, monkeypatch
):
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    with closing(open_metadata_store(postgres_url)) as store:
        assert store.data_sources() == []
    monkeypatch.delenv("PGPASSWORD")
    wrong = postgres_url.replace("strata@", "strata:not-the-Pa55word@")
    with pytest.raises(MetadataStoreError, match="unreachable") as e:
        open_metadata_store(wrong)
    assert "not-the-Pa55word" not in str(e.value) and "strata:***@" in str(e.value)


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(MetadataStoreError, match=r"postgresql://strata@127\.0\.0\.1:1/x is unreachable"):
        open_metadata_store("postgresql://strata@127.0.0.1:1/x")


def test_subscribers_hear_of_each_publish(postgres_url):
    heard = threading.Event()
    with (
        closing(open_metadata_store(postgres_url)) as reader,
        closing(open_metadata_store(postgres_url)) as writer,
    ):
        reader.subscribe(heard.set)
        assert heard.wait(10)  # once on connecting: changes may have been missed before
        heard.clear()
        writer.publish([seg("2020-01-01/2020-01-02", "v1")], overwrite=False)
        assert heard.wait(10)
        heard.clear()
        writer.mark_unused([seg("2020-01-01/2020-01-02", "v1").id])
        assert heard.wait(10)


def _change_log_reads(store) -> list[str]:
    """Spy on the SQL the store sends."""
    sent: list[str] = []
    conn = store._connection(check=False)
    real = conn.execute

    def spy(query, params=None, **kw):
        sent.append(str(query))
        return real(query, params, **kw)

    conn.execute = spy
    return sent


def test_an_unchanged_read_is_one_row_and_a_change_reads_only_its_rows(postgres_url):
    with (
        closing(open_metadata_store(postgres_url)) as reader,
        closing(open_metadata_store(postgres_url)) as writer,
    ):
        writer.publish(
            [seg(f"2020-01-{d:02d}/2020-01-{d + 1:02d}", "v1") for d in range(1, 21)], overwrite=False
        )
        assert len(reader.used_segments()) == 20
        sent = _change_log_reads(reader)
        assert len(reader.used_segments("w")) == 20
        assert not any("druid_segments" in q for q in sent)  # only the version counter
        sent.clear()
        writer.publish([seg("2020-02-01/2020-02-02", "v1")], overwrite=False)
        writer.mark_unused([seg("2020-01-01/2020-01-02", "v1").id])
        assert len(reader.used_segments()) == 20
        assert [q for q in sent if "FROM druid_segments" in q] == [
            "SELECT payload FROM druid_segments WHERE used AND id = ANY(%s)"
        ]


def test_a_reader_behind_the_change_log_reads_everything_again(postgres_url):
    with (
        closing(open_metadata_store(postgres_url)) as reader,
        closing(open_metadata_store(postgres_url)) as writer,
    ):
        assert reader.used_segments() == []
        with writer.transaction() as conn:  # prune the log as if LOG_KEEP changes had passed
            conn.execute("UPDATE strata_segments_version SET version = version + %s", (LOG_KEEP,))
        writer.publish([seg("2020-01-01/2020-01-02", "v1")], overwrite=False)
        assert [s.id for s in reader.used_segments()] == [seg("2020-01-01/2020-01-02", "v1").id]


def test_strata_segments_lists_drops_and_restores_on_postgres(postgres_url):
    """The command line opens the store the flag names (libpq finds the password in PGPASSFILE)."""
    a, b = seg("2020-01-01/2020-01-02", "v1"), seg("2020-01-02/2020-01-03", "v1")
    with closing(open_metadata_store(postgres_url)) as store:
        store.publish([a, b], overwrite=False)

    def segments(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "strata.cli.main", "segments", *args, "--metadata", postgres_url],
                              capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        return done.stdout

    assert [json.loads(line)["identifier"] for line in segments("list", "--json").splitlines()] == [
        a.id,
        b.id,
    ]
    assert "1 segment(s) dropped" in segments("drop", a.id)
    assert [json.loads(line)["identifier"] for line in segments("list", "--json").splitlines()] == [b.id]
    assert "1 segment(s) restored" in segments("restore", "--datasource", "w")
    with closing(open_metadata_store(postgres_url)) as store:
        assert store.used_segments() == [a, b]


def test_a_read_only_role_opens_an_existing_store(postgres_url):
    """A historical may run as a role that can only read: opening runs no DDL once the schema is
    current, reads work, and a write is refused with a clear error."""
    a = seg("2020-01-01/2020-01-02", "v1")
    with closing(open_metadata_store(postgres_url)) as store:
        store.publish([a], overwrite=False)
        with store.transaction() as conn:
            conn.execute("DROP ROLE IF EXISTS t_reader")
            conn.execute("CREATE ROLE t_reader LOGIN PASSWORD 'r3ader-pw'")
            conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO t_reader")
            conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    reader_url = postgres_url.replace("strata@", "t_reader:r3ader-pw@")
    with closing(open_metadata_store(reader_url)) as reader:
        assert reader.used_segments() == [a] and reader.data_sources() == ["w"]
        with pytest.raises(MetadataStoreError, match="permission denied") as e:
            reader.mark_unused([a.id])
        assert "r3ader-pw" not in str(e.value)
