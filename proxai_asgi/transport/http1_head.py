"""HTTP/1.1 request heads and response heads for the lean pool, sans-IO.

h11 cost ~40 µs per request here (event objects, its state machine, a regex per
header), on a path whose every other step is a few µs. The usual head is written and
parsed with one regex that accepts only what h11 accepts; anything that regex does not
vouch for (a header h11 would normalise or refuse, a 1xx answer, bare LF line ends,
an early close, an over-long head) goes through h11 itself, so every acceptance and
every refusal, and its message, is h11's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import h11

RawHeaders = list[tuple[bytes, bytes]]

# RFC 9110 tokens and field values, as h11's own regexes spell them.
_TOKEN = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
_VALUE = rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?"
_METHOD = re.compile(_TOKEN)
_TARGET = re.compile(rb"[\x21-\x7e]+")
_FIELD_VALUE = re.compile(_VALUE)
# Request fields as h11 writes them, none of those it would reorder or normalise (the
# pool writes Host and Content-Length itself; a caller's own would be h11's to judge).
_REQUEST_FIELDS = re.compile(
    rb"(?:(?!(?i:host|content-length|transfer-encoding):)" + _TOKEN + rb": " + _VALUE + rb"\r\n)*"
)
_RESPONSE_HEAD = re.compile(
    rb"HTTP/[0-9]\.[0-9] [0-9]{3}(?: (?:[ \t]|[^\x00\s])*)?"
    rb"(?:\r\n" + _TOKEN + rb":[ \t]*" + _VALUE + rb"[ \t]*)*"
)
_BLANK_LINE = re.compile(rb"\n\r?\n")  # where h11 ends a head
_MAX_INCOMPLETE = 16 * 1024  # h11's limit on a head still arriving
_MAX_LENGTH_DIGITS = 20  # h11's limit on Content-Length


class Sent(NamedTuple):
    """A request to write; kept so that h11 can be shown it when it must read the
    answer's head."""

    method: bytes
    target: bytes
    host: bytes
    headers: RawHeaders  # the caller's, without Host or Content-Length
    body: bytes
    identity: bool  # ask for an uncompressed answer

    def h11_headers(self) -> RawHeaders:
        """The fields in the order the pool gives them to h11."""
        out = [(b"host", self.host), *self.headers]
        if self.body or self.method != b"GET":
            out.append((b"content-length", b"%d" % len(self.body)))
        if self.identity:
            out.append((b"accept-encoding", b"identity"))
        return out


class Head(NamedTuple):
    status: int
    version: bytes  # b"1.1", b"1.0"
    headers: RawHeaders  # names lower-cased, values as h11 gives them
    rest: bytes  # bytes after the head: the body's start


class Hangup(Exception):
    """The upstream closed the connection before any answer."""


class Unsendable(Exception):
    """h11 refuses to send this request (its reason)."""


class Malformed(Exception):
    """h11 refuses this answer's head."""


def write_request(sent: Sent) -> bytes:
    """The request's bytes, as h11 writes them (raises ``Unsendable`` for what h11
    refuses to send)."""
    method, target, host, headers, body, identity = sent
    fields = b"".join([b"%s: %s\r\n" % kv for kv in headers])
    if (
        _REQUEST_FIELDS.fullmatch(fields)
        # One line per field: a value holding CR LF would pass as two fields above.
        and fields.count(b"\n") == len(headers)
        and _FIELD_VALUE.fullmatch(host)
        and _METHOD.fullmatch(method)
        and _TARGET.fullmatch(target)
    ):
        if body or method != b"GET":
            fields += b"content-length: %d\r\n" % len(body)
        if identity:
            fields += b"accept-encoding: identity\r\n"
        return b"%s %s HTTP/1.1\r\nhost: %s\r\n%s\r\n%s" % (method, target, host, fields, body)
    import h11

    try:
        return _send(_h11_client(), sent)
    except h11.LocalProtocolError as exc:
        raise Unsendable(str(exc)) from None


def _h11_client() -> h11.Connection:
    import h11

    return h11.Connection(h11.CLIENT)


def _send(conn: h11.Connection, sent: Sent) -> bytes:
    import h11

    request = h11.Request(method=sent.method, target=sent.target, headers=sent.h11_headers())
    head = conn.send(request)
    data = conn.send(h11.Data(data=sent.body)) if sent.body else b""
    end = conn.send(h11.EndOfMessage())
    return (head or b"") + (data or b"") + (end or b"")


def read_head(sent: Sent, received: bytes, eof: bool) -> Head | None:
    """The answer's head once ``received`` holds it, None while it is incomplete.
    Raises ``Malformed`` for a head h11 refuses, ``Hangup`` for a close before any
    answer."""
    end = received.find(b"\r\n\r\n")
    if end >= 0:
        head = _parse(received[:end])
        if head is not None:
            return head._replace(rest=received[end + 4 :])
    elif not (
        eof
        or len(received) > _MAX_INCOMPLETE
        or (received and received[0] < 0x21)
        or _BLANK_LINE.search(received)
    ):
        return None  # h11 would wait too
    return _h11_head(sent, received, eof)


def _parse(head: bytes) -> Head | None:
    """A final answer's head (no CRLF CRLF), or None when h11 must judge it."""
    if not _RESPONSE_HEAD.fullmatch(head):
        return None
    lines = head.split(b"\r\n")
    status = int(lines[0][9:12])
    if status < 200:
        return None  # informational: h11 reads past it
    headers: RawHeaders = []
    length = chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.lower()
        value = value.strip(b" \t")
        if name == b"content-length":
            if length or not value.isdigit() or len(value) > _MAX_LENGTH_DIGITS:
                return None  # h11 merges or refuses repeats and lists
            length = True
        elif name == b"transfer-encoding":
            value = value.lower()
            if chunked or value != b"chunked":
                return None  # h11 refuses these
            chunked = True
        headers.append((name, value))
    return Head(status, lines[0][5:8], headers, b"")


def _h11_head(sent: Sent, received: bytes, eof: bool) -> Head | None:
    """What h11 makes of ``received`` after ``sent``."""
    import h11

    conn = _h11_client()
    _send(conn, sent)  # write_request sent it: h11 accepts it
    if received:  # b"" would tell h11 the connection closed
        conn.receive_data(received)
    if eof:
        conn.receive_data(b"")
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise Malformed(str(exc)) from None
        if event is h11.NEED_DATA:
            return None
        if type(event) is h11.Response:
            headers = [(k, v) for k, v in event.headers]
            return Head(event.status_code, event.http_version, headers, conn.trailing_data[0])
        if type(event) is not h11.InformationalResponse:  # 100 Continue and friends
            raise Hangup
