"""The part of memcached's meta protocol the warm read speaks, pure: requests and their responses.

A warm read asks each server about a list of keys in one write: `mg <key> c` (is it there, and its
CAS) for a value already held, `mg <key> v c` (its value and CAS) for the others, then `mn`, whose
`MN` answer closes the response. Answers come back in request order (`HD c<cas>`, `VA <size>
c<cas>` and the data, `EN` for a miss), so the whole response is split in one pass with
`bytes.find`, values located by offset and sliced once by the caller. memcached >= 1.6 speaks it.
"""

from __future__ import annotations

from collections.abc import Iterable

END_REQUEST = b"mn\r\n"
END = b"MN\r\n"
NO_CAS = b"c0"  # what a server started with -C (CAS disabled) answers: no proof of anything


class ProtocolError(Exception):
    """The server answered something the request cannot have asked for (an error line, junk)."""


# one answer: None for a miss, else (the CAS token as sent, e.g. b"c42", the value as stored, or
# None for a key asked only for its CAS)
Answer = tuple[bytes, bytes | None] | None


def provable(cas: bytes) -> bool:
    """True for a CAS token that identifies one version of an item (not a -C server's `c0`)."""
    return cas[:1] == b"c" and cas != NO_CAS and cas[1:].isdigit()


def check_line(mkey: bytes) -> bytes:
    return b"mg " + mkey + b" c\r\n"


def read_line(mkey: bytes) -> bytes:
    return b"mg " + mkey + b" v c\r\n"


def request(lines: Iterable[bytes]) -> bytes:
    return b"".join(lines) + END_REQUEST


def unchanged_response(cas_tokens: Iterable[bytes]) -> bytes:
    """The exact response to a request of check lines when every key still has these CAS."""
    return b"".join(b"HD " + cas + b"\r\n" for cas in cas_tokens) + END


def parse(response: bytes) -> list[Answer] | None:
    """Every answer of a response to `request`, in order, or None while it is incomplete; raises
    ProtocolError on an error line or anything after `MN`."""
    answers: list[Answer] = []
    append, find, total = answers.append, response.find, len(response)
    pos = 0
    while True:
        eol = find(b"\r\n", pos)
        if eol < 0:
            return None
        code = response[pos : pos + 3]
        if code == b"HD ":
            append((response[pos + 3 : eol], None))
            pos = eol + 2
        elif code == b"VA ":
            size, _, cas = response[pos + 3 : eol].partition(b" ")
            if not size.isdigit():
                raise ProtocolError(f"memcached value size {size[:20]!r}")
            start = eol + 2
            end = start + int(size)
            if end + 2 > total:
                return None
            if response[end : end + 2] != b"\r\n":
                raise ProtocolError("memcached value not followed by CRLF")
            append((cas, response[start:end]))
            pos = end + 2
        elif code == b"EN\r":
            append(None)
            pos = eol + 2
        elif code == b"MN\r":
            if eol + 2 != total:
                raise ProtocolError("memcached sent more than was asked for")
            return answers
        else:
            raise ProtocolError(f"memcached answered {response[pos:eol][:200]!r}")
