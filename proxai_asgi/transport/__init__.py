"""Reaching an upstream: the lean HTTP/1.1 pool, the httpx client, the wrapped app, TLS,
the header policy, and reading an upstream body under watch."""
