"""Start-up: ``import proxai_asgi`` loads only what every user needs. httpx (HTTP
upstreams off the lean pool), the lean pool (the default ``lean_http``), h11 (only for
heads out of the ordinary) and each protocol's codec are loaded when first used.
Checked in a fresh interpreter (its time is a benchmark: ``bench/import_time.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAZY = [
    "httpx",
    "h11",
    "proxai_asgi.transport.http1",
    "proxai_asgi.protocols.openai_chat.stream",
    "prometheus_client",  # metrics=True only
]


def printed(probe: str) -> str:
    """What ``probe`` prints, run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout


def loaded_after(statement: str) -> dict[str, bool]:
    report = f"print(json.dumps({{m: m in sys.modules for m in {LAZY!r}}}))"
    result: dict[str, bool] = json.loads(printed(f"import sys, json; {statement}; {report}"))
    return result


def test_import_loads_no_transport_and_no_codec() -> None:
    assert loaded_after("import proxai_asgi") == dict.fromkeys(LAZY, False)


def test_each_piece_loads_when_a_middleware_needs_it() -> None:
    lean = loaded_after(
        "from proxai_asgi import ProxaiMiddleware, Upstream; "
        "ProxaiMiddleware(None, upstream=Upstream.inner_app('anthropic_messages'))"
    )
    assert lean["proxai_asgi.transport.http1"] and not lean["h11"] and not lean["httpx"]
    client = loaded_after(
        "from proxai_asgi import ProxaiMiddleware, Upstream; "
        "ProxaiMiddleware(None, upstream=Upstream('openai_chat_completions', "
        "'http://127.0.0.1:9/v1'), lean_http=False).http.client"
    )
    assert client["httpx"] and not client["proxai_asgi.transport.http1"]
    codec = loaded_after(
        "from proxai_asgi.protocols import get_codec; get_codec('openai_chat_completions')"
    )
    assert codec["proxai_asgi.protocols.openai_chat.stream"]


def test_every_codec_loaded_imports_no_crypto_nor_email() -> None:
    """hashlib/hmac/random (through ``secrets``) and ``email.utils`` cost ~6 ms of
    start-up; ids are ``os.urandom`` and the rest imports where it is used."""
    probe = (
        "import sys, json; import proxai_asgi; "
        "from proxai_asgi.protocols import all_codecs; all_codecs(); "
        "print(json.dumps([m for m in ('secrets', 'hashlib', 'hmac', 'email.utils') "
        "if m in sys.modules]))"
    )
    assert json.loads(printed(probe)) == []


def _unbuilt_decoders() -> dict[str, list[str]]:
    """Per codec module, the names of its lazy decoders not built yet; a typed msgspec
    decoder built at import is listed under ``eager``."""
    import importlib
    from typing import Any

    import msgspec

    from proxai_asgi.codec import OnePassDecoder
    from proxai_asgi.lazy_decoder import LazyDecoder
    from proxai_asgi.protocols import _MODULES

    out: dict[str, list[str]] = {}
    for package in _MODULES.values():
        for part in ("request", "response", "stream", "errors"):
            module = importlib.import_module(f"proxai_asgi.protocols.{package}.{part}")
            for name, value in vars(module).items():
                if isinstance(value, OnePassDecoder):
                    value = value._decoder
                if isinstance(value, LazyDecoder) and value.decode == value._first_decode:
                    out.setdefault(f"{package}.{part}", []).append(name)
                elif isinstance(value, msgspec.json.Decoder) and value.type is not Any:
                    out.setdefault("eager", []).append(f"{package}.{part}.{name}")
    return out


def test_codec_decoders_are_built_by_their_first_body() -> None:
    """Building a typed msgspec decoder evaluates its Structs' annotations (~10 ms
    for the four codecs): a codec's decoders wait for the first body they decode.
    Checked in a fresh interpreter, with a Chat client's first request."""
    probe = (
        "import sys, json; sys.path.insert(0, 'tests'); import test_lazy_imports as t; "
        "from proxai_asgi.protocols import all_codecs, get_codec; "
        "from proxai_asgi.errors import TranslationReport; all_codecs(); "
        "before = t._unbuilt_decoders(); "
        "get_codec('openai_chat_completions').decode_request("
        'b\'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}\', '
        "TranslationReport()); "
        "print(json.dumps([before, t._unbuilt_decoders()]))"
    )
    before, after = json.loads(printed(probe))
    # Nothing typed is built by loading the codecs (and every module has some).
    assert "eager" not in before
    assert set(before) >= {
        "openai_chat.request",
        "openai_chat.stream",
        "anthropic_messages.request",
        "openai_responses.request",
        "gemini_generate_content.response",
    }
    # The Chat request's own decoder was built by the body; nothing else was.
    assert "_ONE_PASS" in before["openai_chat.request"]
    assert "_ONE_PASS" not in after.get("openai_chat.request", [])
    assert after["openai_chat.stream"] == before["openai_chat.stream"]
    assert after["anthropic_messages.request"] == before["anthropic_messages.request"]


def test_the_strict_gemini_decoder_waits_for_a_gemini_body() -> None:
    probe = (
        "from proxai_asgi.protocols import all_codecs; all_codecs(); "
        "from proxai_asgi.protocols.gemini_generate_content import request as r; "
        "print(r._strict_decoder.cache_info().currsize)"
    )
    assert printed(probe).strip() == "0"
