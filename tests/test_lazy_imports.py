"""Start-up: ``import proxai_asgi`` loads only what every user needs. httpx (HTTP
upstreams off the lean pool), the lean pool and h11 (the default ``lean_http``) and each protocol's
codec are loaded when first used. Checked in a fresh interpreter (its time is a
benchmark: ``bench/import_time.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAZY = ["httpx", "h11", "proxai_asgi.http1", "proxai_asgi.protocols.openai_chat.stream"]


def loaded_after(statement: str) -> dict[str, bool]:
    report = f"print(json.dumps({{m: m in sys.modules for m in {LAZY!r}}}))"
    probe = f"import sys, json; {statement}; {report}"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    result: dict[str, bool] = json.loads(out.stdout)
    return result


def test_import_loads_no_transport_and_no_codec() -> None:
    assert loaded_after("import proxai_asgi") == dict.fromkeys(LAZY, False)


def test_each_piece_loads_when_a_middleware_needs_it() -> None:
    lean = loaded_after(
        "from proxai_asgi import ProxaiMiddleware, Upstream; "
        "ProxaiMiddleware(None, upstream=Upstream.inner_app('anthropic_messages'))"
    )
    assert lean["h11"] and lean["proxai_asgi.http1"] and not lean["httpx"]
    client = loaded_after(
        "from proxai_asgi import ProxaiMiddleware, Upstream; "
        "ProxaiMiddleware(None, upstream=Upstream('openai_chat_completions', "
        "'http://127.0.0.1:9/v1'), lean_http=False).http.client"
    )
    assert client["httpx"] and not client["proxai_asgi.http1"]
    codec = loaded_after(
        "from proxai_asgi.protocols import get_codec; get_codec('openai_chat_completions')"
    )
    assert codec["proxai_asgi.protocols.openai_chat.stream"]
