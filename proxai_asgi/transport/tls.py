"""TLS settings for HTTPS upstreams, one source for both transports.

``Upstream(verify=...)`` takes what httpx's ``verify`` takes:

- ``True`` (the default): the certificates httpx trusts by default, so that an
  upstream reached through the lean pool is verified exactly as through httpx
  (0.28): the file named by ``SSL_CERT_FILE`` if set, else the directory named by
  ``SSL_CERT_DIR`` if set, else certifi's bundle; hostname checked, TLS >= 1.2
  (``ssl.create_default_context``'s rules).
- a path: a CA bundle file (PEM) or a directory of hashed CA files to trust instead;
- an ``ssl.SSLContext``: used as given (client certificates, pinning, ...);
- ``False``: no verification at all (a local test server; never for a real upstream).
"""

from __future__ import annotations

import os
import ssl
import weakref
from typing import TypeAlias

Verify: TypeAlias = "bool | str | ssl.SSLContext"

# Contexts are costly to build (certifi's bundle is ~150 certificates, ~10 ms) and
# safe to share: one per setting and per environment it was read from.
_contexts: dict[tuple[bool | str, str, str], ssl.SSLContext] = {}
_given: weakref.WeakSet[ssl.SSLContext] = weakref.WeakSet()  # contexts users passed


def client_context(verify: Verify) -> ssl.SSLContext:
    """The client context for ``verify``, offering HTTP/1.1 by ALPN (as httpx does for
    a client without HTTP/2)."""
    if isinstance(verify, ssl.SSLContext):
        if verify not in _given:  # once: this runs for every request
            verify.set_alpn_protocols(["http/1.1"])  # httpcore sets it on given ones too
            _given.add(verify)
        return verify
    key = (verify, os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))
    ctx = _contexts.get(key)
    if ctx is None:
        ctx = _build(verify, key[1], key[2])
        ctx.set_alpn_protocols(["http/1.1"])
        _contexts[key] = ctx
    return ctx


def _build(verify: bool | str, cert_file: str, cert_dir: str) -> ssl.SSLContext:
    if verify is False:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    import certifi  # httpx's own dependency

    return ssl.create_default_context(cafile=certifi.where())


def httpx_verify(verify: Verify) -> Verify:
    """What to give an httpx client for ``verify``: its own default for ``True`` (it
    reads the same environment), the same context as the lean pool otherwise."""
    return True if verify is True else client_context(verify)
