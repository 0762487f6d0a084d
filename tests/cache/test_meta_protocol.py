"""The meta-protocol requests and response parser (cache.meta_protocol), pure: no server."""

from collections.abc import Sequence

import pytest

from cache.meta_protocol import (
    ProtocolError,
    check_line,
    parse,
    provable,
    read_line,
    request,
    unchanged_response,
)

# values that look like protocol: line ends, a terminator, a header, nothing
TRICKY = [b"plain", b"a\r\nb", b"ends in MN\r\n", b"VA 5 c1\r\nEN\r\n", b"", b"\x00\xff" * 300]


def response_of(answers: Sequence[tuple[bytes, bytes | None] | None]) -> bytes:
    """Written here from memcached's protocol.txt, apart from the parser under test."""
    out = []
    for answer in answers:
        if answer is None:
            out.append(b"EN\r\n")
        elif answer[1] is None:
            out.append(b"HD %s\r\n" % answer[0])
        else:
            out.append(b"VA %d %s\r\n%s\r\n" % (len(answer[1]), answer[0], answer[1]))
    return b"".join(out) + b"MN\r\n"


def test_requests_are_mg_lines_closed_by_mn():
    assert check_line(b"p:ab:cd") == b"mg p:ab:cd c\r\n"
    assert read_line(b"p:ab:cd") == b"mg p:ab:cd v c\r\n"
    assert request([check_line(b"k1"), read_line(b"k2")]) == b"mg k1 c\r\nmg k2 v c\r\nmn\r\n"


def test_parse_reads_values_checks_and_misses_in_order():
    answers = [(b"c%d" % i, v) for i, v in enumerate(TRICKY, 1)] + [None, (b"c99", None), None]
    assert parse(response_of(answers)) == answers


@pytest.mark.parametrize("cut", range(1, 60))
def test_an_incomplete_response_is_none_at_every_cut(cut):
    whole = response_of([(b"c7", b"ends in MN\r\n"), None, (b"c8", None), (b"c9", b"x\r\ny")])
    assert parse(whole[: len(whole) - cut]) is None


@pytest.mark.parametrize(
    "response",
    [
        b"SERVER_ERROR out of memory\r\nMN\r\n",
        b"CLIENT_ERROR bad command line format\r\nMN\r\n",
        b"ERROR\r\nMN\r\n",
        b"VA x c1\r\nabc\r\nMN\r\n",
        b"VA 3 c1\r\nabcd\r\nMN\r\n",  # the value is not where its size says it ends
        b"EN\r\nMN\r\nEN\r\n",  # more than was asked for
    ],
)
def test_errors_and_junk_raise(response):
    with pytest.raises(ProtocolError):
        parse(response)


def test_unchanged_response_is_the_servers_answer_to_check_lines():
    assert unchanged_response([b"c5", b"c12"]) == response_of([(b"c5", None), (b"c12", None)])
    assert parse(unchanged_response([b"c5", b"c12"])) == [(b"c5", None), (b"c12", None)]


@pytest.mark.parametrize(("token", "expected"), [(b"c1", True), (b"c18446744073709551615", True),
                                                 (b"c0", False), (b"", False), (b"t30", False), (b"c", False)])  # fmt: skip
def test_only_a_nonzero_cas_proves_a_version(token, expected):
    assert provable(token) is expected
