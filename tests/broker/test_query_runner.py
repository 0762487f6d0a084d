"""Scatter/gather, retries, partial results, timeouts and cancellation against fake data nodes."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import pytest

from broker_service.data_node_client import DataNodeClient
from broker_service.query_runner import QueryRunner, RunnerLimits
from broker_service.server_view import BrokerServerView
from strata.cli.local_servers import free_port
from strata.discovery.server_metadata import ServerMetadata
from strata.query.errors import (
    QueryCancelled,
    QueryError,
    QueryTimeout,
    ResourceLimitExceeded,
    SegmentsMissing,
)
from tests.broker.fake_data_node import FakeNode, node_app
from tests.broker.helpers import run, segment, serve, sum_query

DAYS = [segment(interval=f"2015-09-{d:02d}/2015-09-{d + 1:02d}") for d in range(1, 7)]
VALUES = {s.id: (10 + i, 100 * (i + 1)) for i, s in enumerate(DAYS)}  # rows, total per segment
WEEK = "2015-09-01/2015-09-07"


def oracle(segments) -> dict:
    return {"rows": sum(VALUES[s.id][0] for s in segments), "total": sum(VALUES[s.id][1] for s in segments)}


class Cluster:
    """Fake nodes on real ports plus a view announcing chosen segments on each."""

    def __init__(self, stack: ExitStack):
        self.stack = stack
        self.view = BrokerServerView()
        self.nodes: dict[str, FakeNode] = {}

    def node(
        self, *, serves, announces=None, running=True, tier_priority=0
    ) -> tuple[ServerMetadata, FakeNode]:
        fake = FakeNode()
        for s in serves:
            fake.add(s, *VALUES[s.id])
        port = self.stack.enter_context(serve(node_app(fake))) if running else free_port()
        server = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}", priority=tier_priority)
        self.view.add_server(server)
        for s in serves if announces is None else announces:
            self.view.add_segment(server.name, s)
        self.nodes[server.name] = fake
        return server, fake

    def runner(self, **kw) -> QueryRunner:
        return QueryRunner(self.view, DataNodeClient(), **kw)


def test_one_request_per_server_naming_exactly_its_segments():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, a = c.node(serves=DAYS[:3])
        _, b = c.node(serves=DAYS[3:])
        result = run(c.runner().run(sum_query(WEEK)))
        assert result.results == [oracle(DAYS)]
        assert len(a.requests) == 1 and len(b.requests) == 1
        named = {d["itvl"] for d in a.requests[0]["intervals"]["segments"]}
        assert named == {str(s.interval) for s in DAYS[:3]}


def test_descriptors_are_clipped_to_the_query_interval():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, a = c.node(serves=DAYS[:2])
        run(c.runner().run(sum_query("2015-09-01T12:00:00Z/2015-09-02T06:00:00Z")))
        itvls = sorted(d["itvl"] for d in a.requests[0]["intervals"]["segments"])
        assert itvls == [
            "2015-09-01T12:00:00.000Z/2015-09-02T00:00:00.000Z",
            "2015-09-02T00:00:00.000Z/2015-09-02T06:00:00.000Z",
        ]
        ctx = a.requests[0]["context"]
        assert ctx["queryId"] and 0 < ctx["timeout"] <= 300_000


def test_missing_segment_is_retried_on_the_replica():
    with ExitStack() as stack:
        c = Cluster(stack)
        # node A announces everything but lost DAYS[0]; B holds a replica of DAYS[0]
        c.node(serves=DAYS[1:], announces=DAYS, tier_priority=5)
        _, b = c.node(serves=DAYS[:1])
        result = run(c.runner().run(sum_query(WEEK)))
        assert result.results == [oracle(DAYS)]
        assert "missingSegments" not in result.response_context
        assert [d["itvl"] for d in b.requests[-1]["intervals"]["segments"]] == [str(DAYS[0].interval)]


def test_refused_connection_goes_to_replica():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS, running=False, tier_priority=5)  # preferred, but dead
        _, b = c.node(serves=DAYS)
        assert run(c.runner().run(sum_query(WEEK))).results == [oracle(DAYS)]
        assert len(b.requests) == 1


@pytest.mark.parametrize("mode", ["error500", "truncate"])
def test_5xx_and_died_mid_response_go_to_replica(mode):
    with ExitStack() as stack:
        c = Cluster(stack)
        _, a = c.node(serves=DAYS, tier_priority=5)
        a.mode = mode
        c.node(serves=DAYS)
        assert run(c.runner().run(sum_query(WEEK))).results == [oracle(DAYS)]
        assert len(a.requests) == 1


def test_no_replica_left_is_an_error_not_a_silent_partial():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[1:], announces=DAYS)
        with pytest.raises(SegmentsMissing) as e:
            run(c.runner().run(sum_query(WEEK)))
        assert DAYS[0].id in e.value.error_message
        body = e.value.to_body("b")
        assert (
            body["errorClass"] == "org.apache.druid.segment.SegmentMissingException" and e.value.status == 500
        )


@pytest.mark.parametrize("failure", ["dead", "truncate"])
def test_segments_of_a_dead_only_replica_get_druids_segment_missing_answer(failure):
    """Druid's retry runner ends with SegmentMissingException, which its query resource answers
    as the catch-all code with that class: 500, "Unknown exception", RUNTIME_FAILURE. The message
    keeps Druid's prefix, names the segments and points at returnPartialResults."""
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[1:])
        _, lost = c.node(serves=DAYS[:2], running=failure != "dead")  # DAYS[1] has another replica
        lost.mode = "truncate"  # died mid-response
        with pytest.raises(SegmentsMissing) as e:
            run(c.runner().run(sum_query(WEEK, numRetriesOnMissingSegments=2)))
        body = e.value.to_body("broker:8082")
        assert e.value.status == 500
        assert {k: body[k] for k in ("error", "errorClass", "errorCode", "persona", "category")} == {
            "error": "Unknown exception",
            "errorClass": "org.apache.druid.segment.SegmentMissingException",
            "errorCode": "legacyQueryException",
            "persona": "OPERATOR",
            "category": "RUNTIME_FAILURE",
        }
        assert body["errorMessage"].startswith(f"No results found for segments[{DAYS[0].id}]")
        assert "returnPartialResults" in body["errorMessage"] and "retried 2 times" in body["errorMessage"]
        assert body["context"]["missingSegments"] == [DAYS[0].descriptor.to_json()]
        assert body["context"]["legacyErrorCode"] == "Unknown exception"
        partial = run(c.runner().run(sum_query(WEEK, returnPartialResults=True)))
        assert partial.results == [oracle(DAYS[1:])]


def test_return_partial_results_flags_missing_segments():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[1:], announces=DAYS)
        result = run(c.runner().run(sum_query(WEEK, returnPartialResults=True)))
        assert result.results == [oracle(DAYS[1:])]
        assert result.response_context["missingSegments"] == [DAYS[0].descriptor.to_json()]


def test_zero_retries_means_no_second_round():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[1:], announces=DAYS, tier_priority=5)
        _, b = c.node(serves=DAYS[:1])
        with pytest.raises(SegmentsMissing):
            run(c.runner().run(sum_query(WEEK, numRetriesOnMissingSegments=0)))
        assert b.requests == []


def test_remote_4xx_error_is_passed_through_not_retried():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, a = c.node(serves=DAYS, tier_priority=5)
        a.mode = "error400"
        _, b = c.node(serves=DAYS)
        with pytest.raises(QueryError) as e:
            run(c.runner().run(sum_query(WEEK)))
        assert e.value.status == 400 and e.value.to_body()["error"] == "Resource limit exceeded"
        assert b.requests == []


def test_all_replicas_failing_reports_the_nodes_error():
    with ExitStack() as stack:
        c = Cluster(stack)
        for _ in range(2):
            _, n = c.node(serves=DAYS)
            n.mode = "error500"
        with pytest.raises(QueryError) as e:
            run(c.runner().run(sum_query(WEEK)))
        assert e.value.status == 500 and "disk on fire" in e.value.error_message


def test_timeout_answers_query_timeout_and_cancels_downstream():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, a = c.node(serves=DAYS)
        a.delay_s = 2

        async def main():
            runner = c.runner()
            with pytest.raises(QueryTimeout):
                await runner.run(sum_query(WEEK, timeout=300, queryId="q-timeout"))
            for _ in range(100):
                if a.cancels:
                    break
                await asyncio.sleep(0.02)

        run(main())
        assert a.cancels == ["q-timeout"]


def test_cancel_stops_the_query_here_and_on_data_nodes():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, a = c.node(serves=DAYS)
        a.delay_s = 2

        async def main():
            runner = c.runner()
            task = asyncio.create_task(runner.run(sum_query(WEEK, queryId="q-cancel")))
            for _ in range(200):
                if a.requests:
                    break
                await asyncio.sleep(0.01)
            assert runner.cancel("q-cancel")
            with pytest.raises(QueryCancelled):
                await task
            assert runner.running_query_ids() == []
            for _ in range(100):
                if a.cancels:
                    break
                await asyncio.sleep(0.02)

        run(main())
        assert a.cancels == ["q-cancel"]


def test_uncovered_intervals_and_overflow():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=[DAYS[1], DAYS[3]])
        result = run(c.runner().run(sum_query(WEEK, uncoveredIntervalsLimit=5)))
        assert result.response_context["uncoveredIntervals"] == [
            "2015-09-01T00:00:00.000Z/2015-09-02T00:00:00.000Z",
            "2015-09-03T00:00:00.000Z/2015-09-04T00:00:00.000Z",
            "2015-09-05T00:00:00.000Z/2015-09-07T00:00:00.000Z",
        ]
        assert result.response_context["uncoveredIntervalsOverflowed"] is False
        result = run(c.runner().run(sum_query(WEEK, uncoveredIntervalsLimit=2)))
        assert len(result.response_context["uncoveredIntervals"]) == 2
        assert result.response_context["uncoveredIntervalsOverflowed"] is True


def test_by_segment_wraps_each_segments_results():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[:2])
        result = run(c.runner().run(sum_query("2015-09-01/2015-09-03", bySegment=True)))
        by_id = {r["result"]["segment"]: r for r in result.results}
        assert set(by_id) == {DAYS[0].id, DAYS[1].id}
        first = by_id[DAYS[0].id]
        assert first["result"]["results"] == [oracle(DAYS[:1])]
        assert first["result"]["interval"] == str(DAYS[0].interval)
        assert first["timestamp"] == "2015-09-01T00:00:00.000Z"


def test_unknown_datasource_is_an_empty_merge():
    with ExitStack() as stack:
        c = Cluster(stack)
        assert run(c.runner().run(sum_query(WEEK, ds="nope"))).results == [{"rows": 0, "total": 0}]


def test_gathered_rows_limit():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        with pytest.raises(ResourceLimitExceeded):
            run(c.runner(limits=RunnerLimits(max_gathered_rows=3)).run(sum_query(WEEK)))
