"""Gemini's URLs: what a client path names, and the upstream URL built from it."""

from __future__ import annotations

import pytest

from proxai_asgi.codec import PathCall, Served
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols.gemini_generate_content import CODEC


@pytest.mark.parametrize(
    ("path", "call"),
    [
        ("/v1beta/models/gemini-2.5-flash:generateContent", PathCall("gemini-2.5-flash", False)),
        ("/v1/models/gemini-2.5-pro:streamGenerateContent", PathCall("gemini-2.5-pro", True)),
        (
            "/v1beta/models/gemini-2.5-flash:countTokens",
            PathCall("gemini-2.5-flash", False, "count_tokens"),
        ),
        ("/v1beta/models/a:b:generateContent", PathCall("a:b", False)),
    ],
)
def test_client_paths_name_the_model_the_stream_and_the_method(path: str, call: PathCall) -> None:
    assert CODEC.serves(path) == Served(call.action, call)


@pytest.mark.parametrize(
    "path",
    [
        "/v1beta/models/m:embedContent",
        "/v2/models/m:generateContent",
        "/v1beta/models/:generateContent",
        "/v1beta/models/m",
    ],
)
def test_other_paths_are_not_gemini_calls(path: str) -> None:
    assert CODEC.serves(path) is None


UNSAFE_MODELS = ["tuned/../m", "m?key=stolen", "m#x", "m x", "..", ".", "m%2e", "m\r\nx"]


@pytest.mark.parametrize("model", UNSAFE_MODELS)
def test_unsafe_model_names_never_enter_an_upstream_url(model: str) -> None:
    """A Gemini path with an unsafe model is still a Gemini call (answered with a 400
    in Google's shape, tests/reliability/test_injection.py); no URL is built for it."""
    call = PathCall(model, False)
    assert CODEC.serves(f"/v1beta/models/{model}:generateContent") == Served("generate", call)
    for base in ("http://h", ""):  # an HTTP upstream's URL, the wrapped app's path
        with pytest.raises(ProxyError) as caught:
            CODEC.upstream_url(base, PathCall(model, True))
        assert (caught.value.status, caught.value.param) == (400, "model")


@pytest.mark.parametrize(
    ("base", "call", "url"),
    [
        (
            "https://generativelanguage.googleapis.com",
            PathCall("gemini-2.5-flash", True),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
            ":streamGenerateContent?alt=sse",
        ),
        (
            "http://127.0.0.1:9/v1",
            PathCall("m", False),
            "http://127.0.0.1:9/v1/models/m:generateContent",
        ),
        (
            "http://h/v1beta/",
            PathCall("m", False, "count_tokens"),
            "http://h/v1beta/models/m:countTokens",
        ),
        ("http://h", None, "http://h/v1beta/models"),
    ],
)
def test_upstream_urls_put_the_version_and_the_call_after_the_base(
    base: str, call: PathCall | None, url: str
) -> None:
    assert CODEC.upstream_url(base, call) == url
