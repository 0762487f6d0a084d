"""The broker's metrics keep a bounded set of labels whatever datasources clients name."""

from __future__ import annotations

from broker_service.metrics import BrokerMetrics
from broker_service.server_view import BrokerServerView


def _labels(metrics: BrokerMetrics) -> set[str]:
    return {
        sample.labels["dataSource"]
        for family in metrics.registry.collect()
        if family.name == "druid_query_time"
        for sample in family.samples
    }


def test_datasources_the_broker_does_not_serve_share_one_label() -> None:
    metrics = BrokerMetrics()
    view = BrokerServerView()
    metrics.serves = view.serves
    for n in range(500):
        metrics.on_query(f"nope-{n}", "timeseries", 0.01, 200)
    assert _labels(metrics) == {""}


def test_a_served_datasource_keeps_its_name() -> None:
    metrics = BrokerMetrics()
    metrics.serves = {"wikipedia"}.__contains__
    metrics.on_query("wikipedia", "topN", 0.01, 200)
    metrics.on_query("elsewhere", "topN", 0.01, 400)
    assert _labels(metrics) == {"wikipedia", ""}
