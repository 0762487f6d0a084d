"""bench.throughput's parts: wrk's Lua script and figures, py-spy's stacks folded, and one short
real wrk run against the bare floor app (no timing asserted: only that it answered every request
with the broker's recorded bytes)."""

from __future__ import annotations

import httpx
import pytest

from bench.profile_stacks import fold, top_frames
from bench.throughput_floor import floor_app
from bench.wrk import available, lua_long_string, lua_script, parse_done_line, run_wrk
from tests.broker.helpers import serve


def test_lua_long_strings_never_close_early() -> None:
    assert lua_long_string('{"a":"b"}') == '[[{"a":"b"}]]'
    assert lua_long_string("x]]y") == "[=[x]]y]=]"
    assert lua_long_string("]]]=]") == "[==[]]]=]]==]"
    assert 'wrk.body = [[{"q":1}]]' in lua_script(b'{"q":1}')


def test_the_done_line_is_the_last_json_line() -> None:
    out = 'Running 1s test\n{"requests":1}\n  Latency ...\n{"requests":5,"errors":0}\n'
    assert parse_done_line(out) == {"requests": 5, "errors": 0}
    with pytest.raises(RuntimeError):
        parse_done_line("no figures")


def test_stacks_fold_into_inclusive_and_own_samples() -> None:
    raw = "main (a.py:1);run (b.py:2);work (c.py:3) 6\nmain (a.py:1);run (b.py:9) 2\nmain (a.py:1);idle (d.py:4) 2\n"
    inclusive, own, total = fold(raw)
    assert total == 10
    assert inclusive["run (b.py)"] == 8 and own["run (b.py)"] == 2 and own["work (c.py)"] == 6
    lines = top_frames(raw, 2)
    assert lines[0].split() == ["80.0%", "20.0%", "run", "(b.py)"]  # the loop's scaffolding (100%) left out


@pytest.mark.skipif(not available(), reason="wrk is installed by scripts/install-system-packages.sh")
def test_wrk_drives_the_floor_app_and_gets_the_recorded_bytes() -> None:
    answers: list[dict[str, object]] = [
        {"request": '{"q":1}', "response": '[{"r":1}]', "headers": {"x-druid-query-id": "abc"}}
    ]
    with serve(floor_app(answers)) as port:
        url = f"http://127.0.0.1:{port}/druid/v2/"
        r = httpx.post(url, content=b'{"q":1}')
        assert (r.status_code, r.content, r.headers["x-druid-query-id"]) == (200, b'[{"r":1}]', "abc")
        assert httpx.post(url, content=b'{"q":2}').status_code == 404
        result = run_wrk(url, b'{"q":1}', connections=2, seconds=1)
        assert result.requests > 0 and result.errors == 0 and result.client_cpu >= 0
        unknown = run_wrk(url, b'{"q":2}', connections=1, seconds=1)
        assert unknown.errors == unknown.requests > 0  # non-2xx answers are counted as errors
