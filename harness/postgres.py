"""A throw-away PostgreSQL server as a child process, for tests and benchmarks.

Debian's `postgresql` package provides the binaries (`/usr/lib/postgresql/<major>/bin`); nothing is
registered with the system's clusters. `initdb` writes a fresh cluster into a temporary directory,
`postgres` serves it on one address and port, and `stop()` ends it by its pid (SIGINT: PostgreSQL's
fast shutdown, which does not wait for clients to disconnect). Started by root, both run as the
`postgres` user (PostgreSQL refuses to run as root). TCP clients authenticate with a password
(SCRAM), so the password paths of the metadata store are exercised; `pgpass` holds it for libpq.
`command_prefix` runs the server elsewhere, e.g. `["ip", "netns", "exec", "host1"]`.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from strata.cli.local_servers import ServerStartError, _ChildServer, free_port

SUPERUSER = "strata"


def postgres_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's binaries, or None when PostgreSQL is not installed."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _run_as() -> tuple[str, ...]:
    """setpriv(1) options that drop root to the `postgres` user (or nobody); none when not root."""
    if os.geteuid() != 0:
        return ()
    for user in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            continue
        return ("--reuid", str(entry.pw_uid), "--regid", str(entry.pw_gid), "--clear-groups")
    raise ServerStartError("running as root and neither a postgres nor a nobody user exists")


@dataclass
class PostgresServer(_ChildServer):
    """One PostgreSQL cluster on `host:port`; `start()` again after `stop()` restarts it."""

    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    base_dir: Path | None = None  # made under the system temp dir (readable by `postgres`) if None
    command_prefix: Sequence[str] = ()
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    # fast shutdown: clients are disconnected rather than waited for; the data stays for a restart
    stop_signal: ClassVar[int] = signal.SIGINT

    @staticmethod
    def available() -> bool:
        return postgres_bin_dir() is not None and (os.geteuid() != 0 or shutil.which("setpriv") is not None)

    @property
    def data_dir(self) -> Path:
        assert self.base_dir is not None
        return self.base_dir / "data"

    @property
    def pgpass(self) -> Path:
        """A libpq password file for this server (point PGPASSFILE at it)."""
        assert self.base_dir is not None
        return self.base_dir / "pgpass"

    def url(self, database: str = "postgres") -> str:
        """The connection URL, without the password (libpq finds it in `pgpass` or PGPASSWORD)."""
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{database}"

    def _prepare(self, bin_dir: Path) -> None:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="strata-postgres-"))
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.pgpass.write_text(f"*:*:*:{SUPERUSER}:{self.password}\n")
        self.pgpass.chmod(0o600)
        if (self.data_dir / "PG_VERSION").exists():
            return
        as_user = _run_as()
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if as_user:
            uid, gid = int(as_user[1]), int(as_user[3])
            os.chown(self.base_dir, uid, gid)
            os.chown(pwfile, uid, gid)
        argv = [str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"]  # fmt: skip
        if as_user:
            argv = ["setpriv", *as_user, "--", *argv]
        try:
            subprocess.run(argv, check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        except subprocess.CalledProcessError as e:
            raise ServerStartError(f"initdb failed: {e.stderr.decode(errors='replace')[-2000:]}") from e
        finally:
            pwfile.unlink(missing_ok=True)
        # initdb admits TCP clients from loopback only; a server on another address (a network
        # namespace standing in for a host) takes password logins from anywhere it listens
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n")

    def serving(self) -> bool:
        if self.command_prefix:  # reachable from where it runs, perhaps not from here
            bin_dir = postgres_bin_dir()
            assert bin_dir is not None
            argv = [
                *self.command_prefix,
                str(bin_dir / "pg_isready"),
                "-q",
                "-h",
                self.host,
                "-p",
                str(self.port),
            ]
            try:
                return subprocess.run(argv, timeout=10, stdin=subprocess.DEVNULL).returncode == 0
            except subprocess.TimeoutExpired:
                return False
        import psycopg

        try:
            with psycopg.connect(self.url(), password=self.password, connect_timeout=2):
                return True
        except psycopg.Error:
            return False

    def start(self, timeout: float = 60.0) -> PostgresServer:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise ServerStartError("PostgreSQL is not installed (apt-get install postgresql)")
        self._prepare(bin_dir)
        # fsync off: a test cluster is thrown away, and durability costs seconds per test session
        argv = [str(bin_dir / "postgres"), "-D", str(self.data_dir),
                "-p", str(self.port), "-c", f"listen_addresses={self.host}",
                "-c", f"unix_socket_directories={self.base_dir}", "-c", "fsync=off",
                "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                "-c", "max_connections=200", "-c", "shared_buffers=32MB"]  # fmt: skip
        assert self.base_dir is not None
        as_user = _run_as()
        if self.command_prefix and as_user:  # the prefix (ip netns exec) runs as root, postgres not
            argv = [*self.command_prefix, "setpriv", *as_user, "--pdeathsig", "KILL", "--", *argv]
            as_user = ()
        self._spawn(argv, self.base_dir / "postgres.log", as_user)
        self._wait_ready(self.serving, timeout, "PostgreSQL")
        return self

    def create_database(self, name: str) -> str:
        """A fresh empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), password=self.password, autocommit=True, connect_timeout=5) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_text(self) -> str:
        try:
            return (self.base_dir / "postgres.log").read_text(errors="replace") if self.base_dir else ""
        except OSError:
            return ""

    def remove(self) -> None:
        """Stop and delete the cluster's directory."""
        self.stop()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)


def wait_until_down(server: PostgresServer, timeout: float = 10.0) -> None:
    """Block until nothing answers on the server's port (after `stop()`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.serving():
        time.sleep(0.05)
