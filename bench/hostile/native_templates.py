"""A valid example of every native filter, aggregator, extraction function, post-aggregator, having
spec, query type and query-level field over the wikipedia sample: the error sweep breaks them one
field at a time. The sweep's test checks every type a registry knows has an example here, and that
each example is answered, so a new type cannot be left out of the sweep nor an example go stale."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TABLE = "wikipedia"
INTERVAL = "2015-09-12/2015-09-13"
EN = {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}

FILTERS: dict[str, dict[str, Any]] = {
    "and": {"type": "and", "fields": [EN, {"type": "selector", "dimension": "isRobot", "value": "true"}]},
    "or": {"type": "or", "fields": [EN, {"type": "selector", "dimension": "page", "value": "Jeremy Corbyn"}]},
    "not": {"type": "not", "field": EN},
    "true": {"type": "true"},
    "false": {"type": "false"},
    "selector": EN,
    "equals": {"type": "equals", "column": "added", "matchValueType": "LONG", "matchValue": 10},
    "null": {"type": "null", "column": "countryName"},
    "in": {"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "#fr.wikipedia"]},
    "inType": {"type": "inType", "column": "added", "matchValueType": "LONG", "sortedValues": [1, 2, 3]},
    "columnComparison": {"type": "columnComparison", "dimensions": ["page", "user"]},
    "bound": {
        "type": "bound",
        "dimension": "added",
        "lower": "10",
        "upper": "100",
        "lowerStrict": False,
        "upperStrict": True,
        "ordering": "numeric",
    },
    "range": {
        "type": "range",
        "column": "added",
        "matchValueType": "LONG",
        "lower": 10,
        "upper": 100,
        "lowerOpen": False,
        "upperOpen": True,
    },
    "interval": {
        "type": "interval",
        "dimension": "__time",
        "intervals": ["2015-09-12T01:00:00Z/2015-09-12T02:00:00Z"],
    },
    "like": {"type": "like", "dimension": "page", "pattern": "%Talk%", "escape": "\\"},
    "regex": {"type": "regex", "dimension": "page", "pattern": "^Talk"},
    "search": {
        "type": "search",
        "dimension": "page",
        "query": {"type": "insensitive_contains", "value": "talk"},
    },
    "expression": {"type": "expression", "expression": "added > 10 && strlen(page) < 20"},
    "arrayContainsElement": {
        "type": "arrayContainsElement",
        "column": "channel",
        "elementMatchValueType": "STRING",
        "elementMatchValue": "#en.wikipedia",
    },
}

AGGREGATORS: dict[str, dict[str, Any]] = {
    "count": {"type": "count", "name": "a"},
    **{
        f"{kind}{op}": {"type": f"{kind}{op}", "name": "a", "fieldName": "added"}
        for kind in ("long", "double", "float")
        for op in ("Sum", "Min", "Max", "First", "Last")
    },
    "stringFirst": {"type": "stringFirst", "name": "a", "fieldName": "page", "maxStringBytes": 100},
    "stringLast": {"type": "stringLast", "name": "a", "fieldName": "page", "maxStringBytes": 100},
    "cardinality": {
        "type": "cardinality",
        "name": "a",
        "fields": ["page", "channel"],
        "byRow": True,
        "round": True,
    },
    "HLLSketchBuild": {
        "type": "HLLSketchBuild",
        "name": "a",
        "fieldName": "user",
        "lgK": 12,
        "tgtHllType": "HLL_4",
        "round": True,
    },
    "HLLSketchMerge": {"type": "HLLSketchMerge", "name": "a", "fieldName": "user", "lgK": 12},
    "filtered": {
        "type": "filtered",
        "name": "a",
        "filter": EN,
        "aggregator": {"type": "longSum", "name": "a", "fieldName": "added"},
    },
}

EXTRACTION_FNS: dict[str, dict[str, Any]] = {
    "lower": {"type": "lower", "locale": "en"},
    "upper": {"type": "upper"},
    "strlen": {"type": "strlen"},
    "substring": {"type": "substring", "index": 1, "length": 3},
    "regex": {
        "type": "regex",
        "expr": "(\\w+)",
        "index": 1,
        "replaceMissingValue": True,
        "replaceMissingValueWith": "none",
    },
    "partial": {"type": "partial", "expr": "^Talk"},
    "stringFormat": {"type": "stringFormat", "format": "[%s]", "nullHandling": "nullString"},
    "timeFormat": {"type": "timeFormat", "format": "yyyy-MM-dd HH", "timeZone": "UTC", "locale": "en"},
    "cascade": {"type": "cascade", "extractionFns": [{"type": "lower"}, {"type": "substring", "index": 0}]},
    "lookup": {
        "type": "lookup",
        "lookup": {"type": "map", "map": {"#en.wikipedia": "English"}},
        "retainMissingValue": True,
    },
    # a cluster without this lookup refuses it, naming it; one with it answers
    "registeredLookup": {"type": "registeredLookup", "lookup": "channel_names", "retainMissingValue": True},
}
UNREGISTERED_LOOKUP = "channel_names"

POST_AGGREGATORS: dict[str, dict[str, Any]] = {
    "fieldAccess": {"type": "fieldAccess", "name": "p", "fieldName": "s"},
    "finalizingFieldAccess": {"type": "finalizingFieldAccess", "name": "p", "fieldName": "s"},
    "constant": {"type": "constant", "name": "p", "value": 3},
    "arithmetic": {
        "type": "arithmetic",
        "name": "p",
        "fn": "/",
        "ordering": None,
        "fields": [{"type": "fieldAccess", "fieldName": "s"}, {"type": "fieldAccess", "fieldName": "c"}],
    },
    "doubleGreatest": {
        "type": "doubleGreatest",
        "name": "p",
        "fields": [{"type": "fieldAccess", "fieldName": "s"}, {"type": "constant", "value": 1}],
    },
    "longLeast": {"type": "longLeast", "name": "p", "fields": [{"type": "fieldAccess", "fieldName": "c"}]},
    "HLLSketchEstimate": {
        "type": "HLLSketchEstimate",
        "name": "p",
        "round": True,
        "field": {"type": "fieldAccess", "fieldName": "u"},
    },
    "hyperUniqueCardinality": {"type": "hyperUniqueCardinality", "name": "p", "fieldName": "u"},
    "expression": {"type": "expression", "name": "p", "expression": "s / c", "ordering": None},
}

HAVINGS: dict[str, dict[str, Any]] = {
    "greaterThan": {"type": "greaterThan", "aggregation": "c", "value": 10},
    "dimSelector": {"type": "dimSelector", "dimension": "channel", "value": "#en.wikipedia"},
    "and": {
        "type": "and",
        "havingSpecs": [
            {"type": "lessThan", "aggregation": "c", "value": 100},
            {"type": "equalTo", "aggregation": "c", "value": 3},
        ],
    },
    "not": {"type": "not", "havingSpec": {"type": "always"}},
    "filter": {
        "type": "filter",
        "filter": {"type": "bound", "dimension": "c", "lower": "5", "ordering": "numeric"},
    },
}

_AGGS = [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "added"}]
QUERIES: dict[str, dict[str, Any]] = {
    "timeseries": {
        "queryType": "timeseries",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "hour",
        "filter": EN,
        "aggregations": _AGGS,
        "descending": False,
        "context": {"skipEmptyBuckets": True, "grandTotal": True},
    },
    "topN": {
        "queryType": "topN",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "dimension": "page",
        "metric": "c",
        "threshold": 5,
        "aggregations": _AGGS,
    },
    "groupBy": {
        "queryType": "groupBy",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "dimensions": ["channel", {"type": "default", "dimension": "isRobot", "outputName": "r"}],
        "aggregations": _AGGS,
        "having": {"type": "greaterThan", "aggregation": "c", "value": 1},
        "limitSpec": {
            "type": "default",
            "limit": 10,
            "offset": 1,
            "columns": [{"dimension": "c", "direction": "descending", "dimensionOrder": "numeric"}],
        },
    },
    "scan": {
        "queryType": "scan",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "columns": ["__time", "page", "added"],
        "limit": 5,
        "offset": 2,
        "order": "ascending",
        "resultFormat": "compactedList",
        "batchSize": 20480,
        "virtualColumns": [
            {"type": "expression", "name": "v", "expression": "added * 2", "outputType": "LONG"}
        ],
    },
    "search": {
        "queryType": "search",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "searchDimensions": ["page"],
        "query": {"type": "insensitive_contains", "value": "corbyn"},
        "sort": {"type": "lexicographic"},
        "limit": 10,
    },
    "timeBoundary": {"queryType": "timeBoundary", "dataSource": TABLE, "bound": "maxTime"},
    "segmentMetadata": {
        "queryType": "segmentMetadata",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "merge": True,
        "analysisTypes": ["cardinality", "minmax"],
    },
    "dataSourceMetadata": {"queryType": "dataSourceMetadata", "dataSource": TABLE},
}


def timeseries(**fields: Any) -> dict[str, Any]:
    """A timeseries over the day with `fields` set (filter, aggregations, postAggregations...)."""
    return {
        "queryType": "timeseries",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "aggregations": _AGGS,
        **fields,
    }


def with_filter(flt: dict[str, Any]) -> dict[str, Any]:
    return timeseries(filter=flt)


def with_aggregator(agg: dict[str, Any]) -> dict[str, Any]:
    return timeseries(aggregations=[agg])


def with_extraction(fn: dict[str, Any]) -> dict[str, Any]:
    return {
        "queryType": "topN",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "dimension": {"type": "extraction", "dimension": "page", "outputName": "d", "extractionFn": fn},
        "metric": "c",
        "threshold": 3,
        "aggregations": [{"type": "count", "name": "c"}],
    }


def with_post_aggregator(post: dict[str, Any]) -> dict[str, Any]:
    aggs = [*_AGGS, {"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]
    return timeseries(aggregations=aggs, postAggregations=[post])


def with_having(having: dict[str, Any]) -> dict[str, Any]:
    return {**QUERIES["groupBy"], "having": having}


def with_expression(expression: str) -> dict[str, Any]:
    """The expression as a virtual column a scan reads (its value computed on the data nodes)."""
    return {
        "queryType": "scan",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "columns": ["v"],
        "limit": 3,
        "virtualColumns": [{"type": "expression", "name": "v", "expression": expression}],
    }


# each family of templates, with how a template of it becomes a whole query
FAMILIES: list[tuple[str, dict[str, dict[str, Any]], Callable[[dict[str, Any]], dict[str, Any]]]] = [
    ("filters", FILTERS, with_filter),
    ("aggregators", AGGREGATORS, with_aggregator),
    ("extraction functions", EXTRACTION_FNS, with_extraction),
    ("post-aggregators", POST_AGGREGATORS, with_post_aggregator),
    ("having specs", HAVINGS, with_having),
    ("queries", QUERIES, dict),
]
