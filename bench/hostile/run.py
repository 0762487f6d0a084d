"""Send hostile requests to a broker, a few at a time, and judge each answer: a status the request's
category allows, Druid's error body without another engine's text, within its deadline, and the
connection never dropped. Shared by the fuzz tests and `python -m bench.hostile`."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import httpx

from bench.hostile.categories import CATEGORIES
from bench.hostile.guardrails import GUARDRAIL_CATEGORIES, HEAVY
from bench.hostile.request import Hostile

DRUID_ERROR_KEYS = {"error", "errorCode", "persona", "category", "errorMessage", "context"}
LEAKS = ("sqlglot", "<class", "<Token", "Traceback", "\x1b", "duckdb.", "Binder Error", "Parser Error",
         "Conversion Error", "Invalid Input Error", "LINE 1:", "pyarrow.lib")  # fmt: skip
DEADLINE_GRACE_S = 5.0  # a refusal at the deadline may take this long to reach the client
CLIENT_TIMEOUT_S = 180.0  # no answer by then: the request is reported, never waited on forever


@dataclass(frozen=True)
class Outcome:
    category: str
    request: str  # the request, shortened (a 10 MB body is not kept for the report)
    status: int  # 0: no HTTP answer
    seconds: float
    problem: str | None  # None: answered as Druid's rules allow

    def __str__(self) -> str:
        return f"[{self.status} in {self.seconds:.1f}s] {self.problem}: {self.request}"


def judge(hostile: Hostile, resp: httpx.Response, seconds: float) -> str | None:
    """What is wrong with `resp` as the answer to `hostile` (None: nothing)."""
    if resp.status_code not in hostile.statuses:
        return f"status {resp.status_code} (allowed {hostile.statuses}): {resp.text[:300]}"
    if hostile.deadline_s is not None and seconds > hostile.deadline_s + DEADLINE_GRACE_S:
        return f"answered after {seconds:.1f}s, past its {hostile.deadline_s:.0f}s deadline"
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            return f"error body is not JSON: {resp.text[:200]}"
        if not isinstance(body, dict) or not set(body) >= DRUID_ERROR_KEYS:
            return f"error body is not Druid's: {resp.text[:200]}"
        message = str(body.get("errorMessage"))
        leaked = [leak for leak in LEAKS if leak in message]
        if leaked:
            return f"error message leaks {leaked}: {message[:200]}"
        if body.get("error") == "Unknown exception":
            return f"an engine error reached the client as Unknown exception: {message[:200]}"
    return None


def send(client: httpx.Client, url: str, hostile: Hostile) -> Outcome:
    """One request and its judged answer. The body is read as it streams and only its start kept
    (a cross join streams gigabytes until its deadline)."""
    started = time.monotonic()
    try:
        with client.stream("POST", url + hostile.path, timeout=CLIENT_TIMEOUT_S, **hostile.kwargs) as resp:
            kept, cut = _read_start(resp)
    except httpx.TimeoutException:
        seconds = time.monotonic() - started
        return Outcome(
            hostile.category, str(hostile), 0, seconds, f"no answer within {CLIENT_TIMEOUT_S:.0f}s"
        )
    except httpx.TransportError as e:
        return Outcome(
            hostile.category, str(hostile), 0, time.monotonic() - started, f"connection failed: {e!r}"
        )
    seconds = time.monotonic() - started
    if cut is not None:
        problem = _cut_short(hostile, resp.status_code, seconds, cut)
        return Outcome(hostile.category, str(hostile), resp.status_code, seconds, problem)
    answer = httpx.Response(resp.status_code, headers=resp.headers, content=kept)
    return Outcome(hostile.category, str(hostile), resp.status_code, seconds, judge(hostile, answer, seconds))


KEPT_BYTES = 1 << 20  # of an answer's body, for judging it


def _read_start(resp: httpx.Response) -> tuple[bytes, str | None]:
    """The first KEPT_BYTES of the body, and why it ended short (None: it was whole)."""
    kept = bytearray()
    try:
        for chunk in resp.iter_bytes():
            if len(kept) < KEPT_BYTES:
                kept += chunk[: KEPT_BYTES - len(kept)]
    except (httpx.RemoteProtocolError, httpx.ReadError) as e:
        return bytes(kept), repr(e)
    return bytes(kept), None


def _cut_short(hostile: Hostile, status: int, seconds: float, why: str) -> str | None:
    """A 200 whose body ends short at the request's deadline is Druid's answer to a statement that
    runs out of time after its first rows were sent (the status cannot change any more); any other
    body cut short is a dropped connection."""
    deadline = hostile.deadline_s
    if (
        status == 200
        and deadline is not None
        and deadline - DEADLINE_GRACE_S <= seconds <= deadline + DEADLINE_GRACE_S
    ):
        return None
    return f"answer cut short after {seconds:.1f}s (status {status}): {why}"


def run_requests(
    url: str,
    hostiles: Iterable[Hostile],
    concurrency: int = 4,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every request sent (`concurrency` at a time, one keep-alive client per thread), made only as
    a thread is free to send it (a 10 MB body is never held longer than its request); the outcomes
    in the order they finished."""
    outcomes: list[Outcome] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    source = iter(hostiles)

    def worker() -> None:
        with httpx.Client() as client:
            while True:
                with lock:
                    hostile = next(source, None) if not failures else None
                if hostile is None:
                    return
                outcome = send(client, url, hostile)
                with lock:
                    outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)

    def guarded() -> None:
        try:
            worker()
        except BaseException as e:  # a generator's or a callback's failure ends the run, reported
            with lock:
                failures.append(e)

    threads = [threading.Thread(target=guarded, name=f"hostile-{i}") for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return outcomes


def category_requests(
    rnd: random.Random, per_category: int, categories: Sequence[str] | None = None
) -> Iterator[Hostile]:
    """`per_category` requests of each hostile category (the heavy ones capped, see HEAVY)."""
    makers = {**CATEGORIES, **GUARDRAIL_CATEGORIES}
    for name in categories or list(makers):
        count = min(per_category, HEAVY.get(name, per_category))
        if name == "huge IN lists":
            count = min(per_category, 4)
        for _ in range(count):
            yield makers[name](rnd)


def tally(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Statuses by category."""
    counts: dict[str, Counter[str]] = {}
    for o in outcomes:
        counts.setdefault(o.category, Counter())[str(o.status)] += 1
    return {category: dict(sorted(c.items())) for category, c in sorted(counts.items())}
