"""Druid's date and time functions through `to_duckdb`, against the results Druid's documentation
publishes (docs/querying/sql-functions.md of apache/druid, examples over `taxi-trips` and
`flight-carriers`), plus cases in other zones worked out by hand from the zone rules."""

from __future__ import annotations

import datetime

import duckdb
import pytest
import sqlglot

from strata.query.errors import InvalidInput
from strata.sql.dialect import DIALECT
from strata.sql.functions import install, to_duckdb
from tests.sql_functions.kit import TAXI, one, run


def test_time_floor_with_origin() -> None:  # sql-functions.md, TIME_FLOOR
    rows = run(
        "SELECT TIME_FLOOR(\"__time\", 'PT45M', TIMESTAMP '2013-08-01 08:0:00') FROM \"taxi-trips\"", TAXI
    )
    assert rows == [("2013-08-01T08:00:00.000Z",), ("2013-08-01T08:45:00.000Z",)]


def test_time_ceil_with_origin() -> None:  # sql-functions.md, TIME_CEIL
    rows = run(
        "SELECT TIME_CEIL(\"__time\", 'PT45M', TIMESTAMP '2013-08-01 08:0:00') FROM \"taxi-trips\"", TAXI
    )
    assert rows == [("2013-08-01T08:45:00.000Z",), ("2013-08-01T09:30:00.000Z",)]


def test_time_extract_in_offset_zone() -> None:  # sql-functions.md, TIME_EXTRACT
    rows = run("SELECT TIME_EXTRACT(\"__time\", 'hour', '-04:00') FROM \"taxi-trips\"", TAXI)
    assert rows == [(4,), (5,)]


def test_time_format_joda_pattern() -> None:  # sql-functions.md, TIME_FORMAT
    sql = "SELECT TIME_FORMAT(\"__time\", 'dd-MM-YYYY hh:mm aa zzz', '-05:00') FROM \"taxi-trips\" LIMIT 1"
    assert one(sql, TAXI) == "01-08-2013 03:14 AM -05:00"


def test_time_in_interval() -> None:  # sql-functions.md, TIME_IN_INTERVAL
    rows = run('SELECT TIME_IN_INTERVAL("__time", \'2013-08-01T08:00:00/PT1H\') FROM "taxi-trips"', TAXI)
    assert rows == [(True,), (False,)]


def test_time_parse_pattern_and_offset() -> None:  # sql-functions.md, TIME_PARSE
    assert one("SELECT TIME_PARSE('2005-11-01', 'YYYY-MM-dd', '-05:00')") == "2005-11-01T05:00:00.000Z"


def test_time_shift() -> None:  # sql-functions.md, TIME_SHIFT
    sql = 'SELECT TIME_SHIFT("__time", \'PT1H\', -24) FROM "taxi-trips" LIMIT 1'
    assert one(sql, TAXI) == "2013-07-31T08:14:37.000Z"


def test_millis_round_trip() -> None:  # sql-functions.md, MILLIS_TO_TIMESTAMP / TIMESTAMP_TO_MILLIS
    assert one("SELECT MILLIS_TO_TIMESTAMP(1375344877000)") == "2013-08-01T08:14:37.000Z"
    assert one('SELECT TIMESTAMP_TO_MILLIS("__time") FROM "taxi-trips" LIMIT 1', TAXI) == 1375344877000


def test_timestampadd_month() -> None:  # sql-functions.md, TIMESTAMPADD
    sql = "SELECT TIMESTAMPADD (MONTH, 5, TIMESTAMP '2000-01-01 00:00:00')"
    assert one(sql) == "2000-06-01T00:00:00.000Z"


def test_timestampdiff_minutes() -> None:  # sql-functions.md, TIMESTAMPDIFF
    sql = 'SELECT TIMESTAMPDIFF (MINUTE, "__time", TIME_PARSE("dropoff_datetime")) FROM "taxi-trips" LIMIT 1'
    assert one(sql, TAXI) == 54


def test_floor_ceil_extract_date_trunc() -> None:  # sql-functions.md, FLOOR/CEIL/EXTRACT/DATE_TRUNC
    sql = (
        'SELECT FLOOR("__time" TO YEAR), CEIL("__time" TO YEAR), EXTRACT(YEAR FROM "__time"),'
        ' DATE_TRUNC(\'decade\', "__time") FROM "taxi-trips" LIMIT 1'
    )
    assert run(sql, TAXI) == [
        ("2013-01-01T00:00:00.000Z", "2014-01-01T00:00:00.000Z", 2013, "2010-01-01T00:00:00.000Z")
    ]


# -- sqlTimeZone: every zone-defaulting function follows the statement's zone ------------------
LA = "America/Los_Angeles"  # 2013-08-01 08:14:37Z is 01:14:37 PDT (UTC-7)


def test_zone_defaults_follow_sql_time_zone() -> None:
    sql = (
        'SELECT TIME_FLOOR("__time", \'P1D\'), FLOOR("__time" TO DAY), DATE_TRUNC(\'month\', "__time"),'
        ' EXTRACT(HOUR FROM "__time"), TIME_EXTRACT("__time", \'DAY\'), CAST("__time" AS DATE),'
        ' TIME_FORMAT("__time"), CAST("__time" AS VARCHAR) FROM "taxi-trips" LIMIT 1'
    )
    assert run(sql, TAXI, zone=LA) == [
        (
            "2013-08-01T07:00:00.000Z",
            "2013-08-01T07:00:00.000Z",
            "2013-08-01T07:00:00.000Z",
            1,
            1,
            "2013-08-01",
            "2013-08-01T01:14:37.000-07:00",
            "2013-08-01 01:14:37",
        )
    ]


def test_timestamp_literals_and_compared_strings_read_in_zone() -> None:
    assert one("SELECT TIMESTAMP '2000-01-01 00:00:00'", zone=LA) == "2000-01-01T08:00:00.000Z"
    sql = 'SELECT COUNT(*) FROM "taxi-trips" WHERE "__time" >= \'2013-08-01 02:00:00\''
    assert one(sql, TAXI, zone=LA) == 1  # 02:00 PDT is 09:00Z: only the 09:13Z row


def test_calendar_units_across_dst_in_zone() -> None:
    # 2013-11-03 is the autumn DST change in Los Angeles: the local day has 25 hours
    sql = "SELECT TIME_SHIFT(TIMESTAMP '2013-11-02 12:00:00', 'P1D', 1)"
    assert one(sql, zone=LA) == "2013-11-03T20:00:00.000Z"  # noon PDT -> noon PST
    assert (
        one("SELECT TIME_FLOOR(TIMESTAMP '2013-11-03 23:00:00', 'P1D')", zone=LA)
        == "2013-11-03T07:00:00.000Z"
    )


def test_timestampdiff_months_counts_whole_months() -> None:
    # Joda adds months clamping to the month's end: Jan 31 + 1 month is Feb 29, reached
    assert one("SELECT TIMESTAMPDIFF(MONTH, TIMESTAMP '2000-01-31', TIMESTAMP '2000-02-29')") == 1
    assert one("SELECT TIMESTAMPDIFF(MONTH, TIMESTAMP '2000-01-15', TIMESTAMP '2000-02-14')") == 0
    assert one("SELECT TIMESTAMPDIFF(MONTH, TIMESTAMP '2000-01-15', TIMESTAMP '2000-03-15')") == 2
    assert one("SELECT TIMESTAMPDIFF(YEAR, TIMESTAMP '2000-03-15', TIMESTAMP '2001-03-14')") == 0
    assert one("SELECT TIMESTAMPDIFF(DAY, TIMESTAMP '2000-01-01', TIMESTAMP '2000-01-03 12:00:00')") == 2


def test_bad_period_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        run("SELECT TIME_FLOOR(TIMESTAMP '2000-01-01', 'P1X')")


def test_explicit_zone_arguments_override_sql_time_zone() -> None:
    # 2013-08-01 08:14:37Z: 17:14:37 in Tokyo (UTC+9), 01:14:37 in Los Angeles (PDT)
    sql = (
        "SELECT TIME_FLOOR(\"__time\", 'P1D', NULL, 'Asia/Tokyo'), TIME_FORMAT(\"__time\", 'yyyy-MM-dd HH:mm Z',"
        " 'Asia/Tokyo'), TIME_EXTRACT(\"__time\", 'DAY', 'Asia/Tokyo'), TIME_PARSE('2013-08-01 17:00', "
        "'yyyy-MM-dd HH:mm', 'Asia/Tokyo'), TIME_SHIFT(\"__time\", 'P1M', 1, 'Asia/Tokyo')"
        ' FROM "taxi-trips" LIMIT 1'
    )
    assert run(sql, TAXI, zone=LA) == [
        (
            "2013-07-31T15:00:00.000Z",
            "2013-08-01 17:14 +0900",
            1,
            "2013-08-01T08:00:00.000Z",
            "2013-09-01T08:14:37.000Z",
        )
    ]


def test_month_floors_and_week_in_zone() -> None:
    sql = (
        "SELECT TIME_FLOOR(\"__time\", 'P1M'), DATE_TRUNC('week', \"__time\"), TIME_CEIL(\"__time\", 'P1M'),"
        ' TIMESTAMPADD(MONTH, 1, "__time") FROM "taxi-trips" LIMIT 1'
    )
    # 2013-08-01 01:14:37 PDT: month starts 2013-08-01 00:00 PDT, the week (Monday) 2013-07-29
    assert run(sql, TAXI, zone=LA) == [
        (
            "2013-08-01T07:00:00.000Z",
            "2013-07-29T07:00:00.000Z",
            "2013-09-01T07:00:00.000Z",
            "2013-09-01T08:14:37.000Z",
        )
    ]


def test_web_console_time_floor_and_now() -> None:  # the web console sends an explicit Etc/UTC
    sql = "SELECT TIME_FLOOR(\"__time\", 'PT1H', NULL, 'Etc/UTC') FROM \"taxi-trips\" LIMIT 1"
    assert one(sql, TAXI, zone=LA) == "2013-08-01T08:00:00.000Z"
    tree = sqlglot.parse_one("SELECT CURRENT_TIMESTAMP, CURRENT_DATE", dialect=DIALECT)
    fixed = to_duckdb(tree, LA, now_ms=1375344877000).sql(dialect="duckdb")
    with duckdb.connect() as conn:
        conn.execute("SET TimeZone='UTC'")
        install(conn)
        now, today = conn.execute(fixed).fetchone() or (None, None)
    assert (str(now), str(today)) == ("2013-08-01 08:14:37", "2013-08-01")  # 01:14 PDT


def test_extract_units() -> None:  # Joda's fields: ISO day of week (Monday 1), ISO week
    sql = (
        'SELECT EXTRACT(DOW FROM "__time"), EXTRACT(DOY FROM "__time"), EXTRACT(WEEK FROM "__time"),'
        ' EXTRACT(QUARTER FROM "__time"), EXTRACT(EPOCH FROM "__time"), EXTRACT(MINUTE FROM "__time"),'
        ' EXTRACT(SECOND FROM "__time") FROM "taxi-trips" LIMIT 1'
    )
    assert run(sql, TAXI) == [(4, 213, 31, 3, 1375344877, 14, 37)]  # 2013-08-01 was a Thursday


def test_schema_types_an_unannotated_statement() -> None:
    """Given only the tables' schema, to_duckdb types the statement itself (a VARCHAR column is
    parsed as a timestamp, a LONG divides as a LONG)."""
    sql = (
        'SELECT TIME_FLOOR("dropoff_datetime", \'PT1H\'), "max_temperature" / 10,'
        ' CAST("__time" AS BIGINT) FROM "taxi-trips" LIMIT 1'
    )
    assert run(sql, TAXI, annotate_here=False) == [("2013-08-01T09:00:00.000Z", 7, 1375344877000)]


def test_joda_zone_letters() -> None:  # Joda: Z -0700, ZZ -07:00, z the short name
    sql = 'SELECT TIME_FORMAT("__time", \'HH:mm Z ZZ z\') FROM "taxi-trips" LIMIT 1'
    assert one(sql, TAXI, zone=LA) == "01:14 -0700 -07:00 PDT"
    assert one(sql, TAXI) == "08:14 +0000 +00:00 UTC"
    sql = "SELECT TIME_FORMAT(\"__time\", 'yyyy-MM-dd''T''HH:mm:ss.SSS', 'Asia/Kolkata') FROM \"taxi-trips\" LIMIT 1"
    assert one(sql, TAXI) == "2013-08-01T13:44:37.000"


def test_install_twice_on_one_connection() -> None:
    with duckdb.connect() as conn:
        install(conn)
        install(conn)
        assert conn.execute("SELECT strata_parse_long('ff', 16)").fetchall() == [(255,)]


def test_time_parse_reads_iso_as_jodas_parser_does() -> None:
    # qaUnnest/mv_sql_scalar_datetime_funcs.std.iq lines 199 and 226: Joda's ISO parser reads a
    # year of 1 to 9 digits (`1` is the year 0001), a month or a day of 1 or 2
    # (the year 0 of `0`, which no Python datetime holds, is in test_engine_sandbox)
    values = {"t": "SELECT * FROM (VALUES ('1'), ('12'), ('2001-2-3'), ('2001-2-3 04:05'), (''), ('x')) v(s)"}
    millis = [row[0] for row in run("SELECT TIMESTAMP_TO_MILLIS(TIME_PARSE(s)) FROM t", values)]
    at = [datetime.datetime(1, 1, 1), datetime.datetime(12, 1, 1), datetime.datetime(2001, 2, 3),
          datetime.datetime(2001, 2, 3, 4, 5)]  # fmt: skip
    epoch = datetime.datetime(1970, 1, 1)
    assert millis == [*((t - epoch) // datetime.timedelta(milliseconds=1) for t in at), None, None]
