"""A real S3 server for tests and benchmarks: moto's server mode (PyPI `moto[server]`) as a child process.

It binds the host and port it is given (127.0.0.1 and a free port by default; a network
namespace's address for the multi-host suite), is awaited on its HTTP API, and is stopped by its
pid. moto keeps objects in memory, so `restart()` copies them out over the S3 API before the stop
and back in after the start: the store is down in between, as a restarting S3 service is, and
nothing is lost. moto accepts any credentials; `client_env()` gives dummy ones for the AWS chain.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from strata.cli.local_servers import ServerStartError, _ChildServer, free_port

ACCESS_KEY = "strata-test"
SECRET_KEY = "strata-test-secret"
REGION = "us-east-1"


def client_env() -> dict[str, str]:
    """Environment variables giving a client of this server credentials through the AWS chain
    (and no instance-metadata lookups, which stall off EC2)."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@dataclass
class S3Server(_ChildServer):
    """`S3Server(port, host=...).start()`; `endpoint` is the `--s3-endpoint` value."""

    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    log: Path | None = None
    command_prefix: list[str] = field(default_factory=list)  # e.g. `ip netns exec NS`: on another host

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.address}"

    def serving(self) -> bool:
        try:
            return httpx.get(self.endpoint + "/moto-api/", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def start(self, timeout: float = 30.0) -> S3Server:
        self._spawn(
            [
                *self.command_prefix,
                sys.executable,
                "-m",
                "moto.server",
                "-H",
                self.host,
                "-p",
                str(self.port),
            ],
            self.log,
        )
        self._wait_ready(self.serving, timeout, "moto S3 server")
        return self

    def create_bucket(self, name: str) -> None:
        response = httpx.put(f"{self.endpoint}/{name}", timeout=10.0)
        if response.status_code not in (200, 409):
            raise ServerStartError(
                f"creating bucket {name}: HTTP {response.status_code} {response.text[:200]}"
            )

    def filesystem(self) -> Any:
        """A pyarrow S3 filesystem on this server (for tests to look at or damage objects directly)."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION, scheme="http",
                               endpoint_override=self.address)  # fmt: skip

    def restart(
        self, down_s: float = 0.0, timeout: float = 30.0, while_down: Callable[[], None] | None = None
    ) -> None:
        """Stop, run `while_down()`, stay down `down_s` seconds, start on the same port with the same
        buckets and objects.

        Call it from a thread that outlives the server (the test's own): the server is started
        with a parent-death signal, which Linux sends when the *thread* that started it ends."""
        from pyarrow import fs

        s3 = self.filesystem()
        with tempfile.TemporaryDirectory(prefix="s3-snapshot-") as tmp:
            buckets = [b.path for b in s3.get_file_info(fs.FileSelector("/", recursive=False))]
            saved: list[str] = []
            for bucket in buckets:
                for info in s3.get_file_info(fs.FileSelector(bucket, recursive=True)):
                    if info.type == fs.FileType.File:
                        local = Path(tmp, info.path)
                        local.parent.mkdir(parents=True, exist_ok=True)
                        with s3.open_input_stream(info.path) as src:
                            local.write_bytes(src.read())
                        saved.append(info.path)
            self.stop()
            if while_down is not None:
                while_down()
            time.sleep(down_s)
            self.start(timeout)
            for bucket in buckets:
                self.create_bucket(bucket)
            for path in saved:
                with s3.open_output_stream(path) as out:
                    out.write(Path(tmp, path).read_bytes())
