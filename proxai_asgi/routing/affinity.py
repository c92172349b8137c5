"""Which session (conversation) a request belongs to, so that routing keeps it on the
key and target whose prompt cache is warm.

The name comes from what clients already send, most specific first: the session
headers their codec declares (``Codec.session_headers``), the generic
``x-session-affinity``, a body field the codec reads (``Codec.session_hint``), and last
a digest of the conversation's prefix. It is a digest of that value, of where it came
from, and of the client's credential: two clients that send the same session id never
share a binding, and the value itself (or the credential) is never kept or shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:  # hashlib's own blake2b, without the OpenSSL start-up cost of importing hashlib
    from _blake2 import blake2b
except ImportError:  # pragma: no cover (a CPython built without it)
    from hashlib import blake2b

if TYPE_CHECKING:
    from ..codec import Codec
    from ..transport.upstream import RawHeaders

# Any client may pin its session with it, whatever its protocol.
GENERIC_HEADERS = (b"x-session-affinity",)
_PERSON = b"proxai-session"  # keeps these digests apart from any other use of blake2b


def session_of(
    client: Codec, headers: RawHeaders, body: bytes, credential: bytes | None
) -> str | None:
    """The request's session as 32 hex digits, or None when nothing names one.
    ``credential``: the raw credential the client sent (None: it sent none), only
    hashed. Never raises, whatever the headers and body hold."""
    found = _header(headers, client.session_headers + GENERIC_HEADERS)
    if found is None:
        found = client.session_hint(body)
        if found is None:
            return None
    source, value = found
    # Each piece length-prefixed: no two (credential, source, value) hash alike.
    scope = b"-:" if credential is None else b"%d:%b" % (len(credential), credential)
    h = blake2b(b"%b%d:%b" % (scope, len(source), source), digest_size=16, person=_PERSON)
    h.update(value)
    return h.hexdigest()


def _header(headers: RawHeaders, names: tuple[bytes, ...]) -> tuple[bytes, bytes] | None:
    """The first of ``names`` (in their order) the request sends with a value."""
    best: tuple[bytes, bytes] | None = None
    rank = len(names)
    for name, value in headers:
        if name in names and value.strip():
            at = names.index(name)
            if at < rank:
                best, rank = (name, value.strip()), at
    return best
