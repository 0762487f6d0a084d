"""How every long-running `strata` command starts, stops and notices that its parent died.

One place for it so the broker, the historical, the quickstart and a future real-time node behave
alike:

- SIGINT and SIGTERM are handled explicitly (never through KeyboardInterrupt): a process started in
  the background by a non-interactive shell inherits SIGINT as *ignored*; installing our own
  handler makes it stop on SIGINT anyway.
- A server stops taking connections at once, lets in-flight requests finish for at most the drain
  time (`--drain-seconds`), cancels what is left, then runs the app's shutdown (which unannounces
  from ZooKeeper), and exits 0. A second signal cuts the drain short.
- A child started with `child_popen_kwargs()` dies when its parent dies, even by `kill -9`:
  `PR_SET_PDEATHSIG` on Linux, and on every platform a watch on the parent's pid (the
  `STRATA_PARENT_PID` environment variable) that starts the same clean shutdown.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any

KEEP_ALIVE_S = 75  # seconds an idle HTTP connection stays open on a Strata server
log = logging.getLogger("strata.server.lifecycle")

DEFAULT_DRAIN_S = 10.0
PARENT_ENV = "STRATA_PARENT_PID"
PARENT_POLL_S = 0.5
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1


class Shutdown(BaseException):
    """Raised in a synchronous main loop by SIGINT/SIGTERM (a BaseException, like KeyboardInterrupt,
    so `except Exception` clean-up paths do not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def add_drain_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=DEFAULT_DRAIN_S,
        help=f"on SIGTERM/SIGINT, seconds in-flight queries may finish before they are cancelled "
        f"(default {DEFAULT_DRAIN_S:g})",
    )


# -- servers --------------------------------------------------------------------------------------


def serve(
    app: Any,
    host: str,
    port: int,
    *,
    drain_s: float = DEFAULT_DRAIN_S,
    log_level: str = "warning",
    on_stop: Callable[[], Awaitable[None]] | None = None,
    reuse_port: bool = False,
    tls: tuple[str, str] | None = None,
) -> int:
    """Serve an ASGI app until SIGINT/SIGTERM (or the parent's death); 0 after a clean stop.

    `on_stop` runs first when a stop is asked for (before connections are drained), e.g. to leave
    ZooKeeper so brokers stop sending new queries while the in-flight ones finish. `reuse_port`:
    bind with SO_REUSEPORT, so sibling worker processes share the port and the kernel spreads
    new connections over them (`supervise_workers`).
    """
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # ours are installed on the loop in _run; uvicorn's would re-raise after shutdown

    from strata.server.coalesced_writes import CoalescingHttpToolsProtocol

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=CoalescingHttpToolsProtocol,  # a response's head and body in one send
        log_level=log_level.lower(),
        access_log=False,
        lifespan="on",
        ssl_certfile=tls[0] if tls else None,  # `tls`: (certificate, key) files; HTTPS only
        ssl_keyfile=tls[1] if tls else None,
        timeout_graceful_shutdown=max(drain_s, 0.0),  # type: ignore[arg-type]  # a float works (wait_for)
        # longer than clients keep idle connections (the broker's data node client: 60 s), so a
        # client closes an idle connection first rather than reusing one the server is closing
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    server = _Server(config)
    sockets = [_reuse_port_socket(host, port)] if reuse_port else None
    return asyncio.run(_run(server, on_stop, sockets))


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening socket others may bind too. Made as TCP explicitly (proto IPPROTO_TCP, not 0):
    asyncio sets TCP_NODELAY only on such sockets' connections, and without it a response written
    in two parts waits for the client's delayed ACK (40 ms a request)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


async def _run(
    server: Any, on_stop: Callable[[], Awaitable[None]] | None, sockets: list[socket.socket] | None = None
) -> int:
    stopping: list[asyncio.Task[None]] = []

    def stop(reason: str) -> None:
        if stopping:
            log.warning("%s again: cancelling in-flight requests now", reason)
            server.force_exit = True
            return
        log.info("%s: draining and stopping", reason)
        stopping.append(asyncio.create_task(_begin_stop(server, on_stop)))

    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop, signal.Signals(sig).name)
    watch = _watch_parent(lambda: stop("parent process exited"))
    freeze = asyncio.create_task(_freeze_when_started(server))
    try:
        await server.serve(sockets=sockets)
    finally:
        freeze.cancel()
        if watch is not None:
            watch.cancel()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    return 0 if server.started else 1


async def _freeze_when_started(server: Any) -> None:
    """Once serving, what start-up built (modules, the app, its caches) leaves the collector's
    sight (`gc.freeze`): a full collection otherwise walks it all, a pause of ~100 ms on a loaded
    2-core machine that lands on whichever query allocates at the time."""
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for it
        await asyncio.sleep(0.05)
    gc.collect()
    gc.freeze()


async def _begin_stop(server: Any, on_stop: Callable[[], Awaitable[None]] | None) -> None:
    if on_stop is not None:
        try:
            await asyncio.wait_for(on_stop(), timeout=5.0)
        except Exception as e:  # a failing hook must not keep the process alive
            log.warning("stop hook failed: %s", e)
    server.should_exit = True


def _watched_parent() -> int | None:
    """The pid of the parent this process must not outlive, when one started it so."""
    raw = os.environ.get(PARENT_ENV)
    return int(raw) if raw and raw.isdigit() else None


def _parent_gone() -> bool:
    parent = _watched_parent()
    return parent is not None and os.getppid() != parent


def _watch_parent(on_exit: Callable[[], None]) -> asyncio.Task[None] | None:
    parent = _watched_parent()
    if parent is None:
        return None

    async def poll() -> None:
        while os.getppid() == parent:  # noqa: ASYNC110 - nothing to wait on: the kernel just reparents
            await asyncio.sleep(PARENT_POLL_S)
        on_exit()

    return asyncio.get_running_loop().create_task(poll(), name="parent-watch")


# -- synchronous supervisors (the quickstart) -----------------------------------------------------


@contextlib.contextmanager
def raise_on_signals() -> Iterator[Callable[[], None]]:
    """Within the block, the first SIGINT/SIGTERM raises `Shutdown`; later ones are ignored while
    the caller cleans up (its clean-up is bounded). The block gets `hold()`: call it before a
    clean-up that must not be interrupted. Old handlers are restored afterwards."""
    raised: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if not raised:
            raised.append(signum)
            raise Shutdown(signum)

    def hold() -> None:
        raised.append(0)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield hold
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def supervise_workers(argv: list[str], workers: int, *, stop_timeout_s: float) -> int:
    """Run `workers` copies of the server command `argv` (each binding the same port with
    SO_REUSEPORT) until SIGINT/SIGTERM, then stop them all (each drains as a lone server does).

    A worker that exits on its own stops the others: the operator sees one failed service, not a
    silently smaller one. Returns 0 after a clean stop, else the first failing worker's exit code.
    """
    procs: list[subprocess.Popen[bytes]] = []
    code = 0
    with raise_on_signals() as hold:
        try:
            for _ in range(workers):
                procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, **child_popen_kwargs()))
            log.info("%d workers started: pids %s", workers, ", ".join(str(p.pid) for p in procs))
            while code == 0:
                for p in procs:
                    exited = p.poll()
                    if exited is not None:
                        log.error("worker %d exited (code %s): stopping the others", p.pid, exited)
                        code = exited or 1
                        break
                else:
                    if _parent_gone():
                        log.info("parent process exited: stopping %d workers", len(procs))
                        break
                    time.sleep(PARENT_POLL_S)
        except Shutdown as e:
            log.info("%s: stopping %d workers", e, len(procs))
        finally:
            hold()
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + stop_timeout_s
            for p in procs:
                try:
                    exited = p.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("worker %d did not stop in %.0fs: killed", p.pid, stop_timeout_s)
                    p.kill()
                    exited = p.wait()
                code = code or (exited if exited not in (0, -signal.SIGTERM) else 0)
    return code


# -- children -------------------------------------------------------------------------------------


def _libc_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def child_popen_kwargs(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Popen arguments that tie a child's life to this process (see the module docstring)."""
    parent = os.getpid()
    prctl = _libc_prctl()  # loaded here, in the parent: the child only calls it

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return {
        "env": {**(os.environ if env is None else env), PARENT_ENV: str(parent)},
        "preexec_fn": preexec,
        "start_new_session": True,  # a terminal's Ctrl-C reaches the parent, which stops children in order
    }
