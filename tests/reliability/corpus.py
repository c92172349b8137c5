"""A corpus of malformed and hostile requests for the four client protocols.

Every case is a request the real API behind that client protocol rejects (or a body
the proxy must refuse on its own: over the size limit, nested past the JSON limit), so
the proxy owes a 4xx in the client's error shape and must not call the upstream.
Requests that are merely *untranslatable* (a valid request the target cannot express)
are not here.

``generate(limit)`` builds the corpus for a proxy whose ``max_body_size`` is ``limit``.
Each ``Case`` says which status it expects (400 unless said otherwise), words one of
which the error message must contain (the field, the path, or what is wrong), and, for
the few cases whose invalidity depends on the target (non-JSON tool arguments are a
string to OpenAI but must become an object for Anthropic), which upstreams it applies to.

As the providers do, the proxy judges a body by its label too: a body labelled as plain
text, a form, multipart or XML is a 400 even when it holds valid JSON (a request with no
content-type is read as JSON). Requests valid in shape that the client's provider rejects
(an out-of-range ``temperature``, ``n: 0``, an unknown tool type, a tool call without its
result...) are here as well (``_provider_rejections``), each streamed and not: the proxy
rejects them the provider's way instead of clamping, dropping or forwarding them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CHAT = "openai_chat_completions"
RESPONSES = "openai_responses"
ANTHROPIC = "anthropic_messages"
GEMINI = "gemini_generate_content"
PROTOCOLS = (CHAT, RESPONSES, ANTHROPIC)  # the fault matrix's
CLIENTS = (*PROTOCOLS, GEMINI)  # the bad-input corpus's
PATH = {
    CHAT: "/v1/chat/completions",
    RESPONSES: "/v1/responses",
    ANTHROPIC: "/v1/messages",
    GEMINI: "/v1beta/models/m:generateContent",
}
JSON_CT = "application/json"

DELETE = object()  # a mutation that removes the key


@dataclass(frozen=True)
class Case:
    client: str
    name: str
    body: bytes = field(repr=False)
    needles: tuple[str, ...]  # the message contains one of these (case-insensitive)
    status: int = 400
    content_type: str = JSON_CT
    chunked: bool = False  # sent without content-length (Transfer-Encoding: chunked)
    only: tuple[str, ...] | None = None  # upstream protocols it applies to (None: both)

    @property
    def id(self) -> str:
        return f"{self.client}:{self.name}"


def base(client: str) -> dict[str, Any]:
    """A minimal valid request."""
    if client == CHAT:
        return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if client == RESPONSES:
        return {"model": "m", "input": [{"role": "user", "content": "hi"}]}
    if client == GEMINI:  # the model is in the URL
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    return {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def _set(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    cur: Any = out
    for key in path[:-1]:
        cur = cur[key]
    if value is DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


HUGE = "x" * 400_000  # a huge string that still fits in the body limit


# --------------------------------------------------------------- every protocol


def _raw_cases(client: str, limit: int) -> Iterator[Case]:
    valid = _dump(base(client))
    json_words = ("json", "expected", "object", "invalid")
    raw: list[tuple[str, bytes]] = [
        ("empty-body", b""),
        ("not-json", b"{not json"),
        ("truncated", valid[:-3]),
        ("null", b"null"),
        ("array", b"[]"),
        ("array-of-request", b"[" + valid + b"]"),
        ("string", b'"hello"'),
        ("number", b"42"),
        ("true", b"true"),
        ("trailing-garbage", valid + b" trailing"),
        ("two-objects", valid + valid),
        ("single-quotes", valid.replace(b'"', b"'")),
        ("nan-literal", valid[:-1] + b',"temperature":NaN}'),
        ("infinity-literal", valid[:-1] + b',"temperature":Infinity}'),
        ("comment", b"// a comment\n" + valid),
        ("unquoted-keys", b"{model: 1}"),
        ("trailing-comma", valid[:-1] + b",}"),
        ("unterminated-string", valid.replace(b'"hi"', b'"hi')),
        ("raw-control-char", valid.replace(b'"hi"', b'"h\x01i"')),
        ("invalid-utf8", valid.replace(b'"hi"', b'"h\xff\xfei"')),
        ("latin1-body", valid.replace(b'"hi"', '"héllo"'.encode("latin-1"))),
        ("overlong-utf8", valid.replace(b'"hi"', b'"\xc0\xaf"')),
        ("utf16-body", valid.decode().encode("utf-16")),
        ("nul-bytes", b"\x00" * 16),
        ("bad-escape", valid.replace(b'"hi"', b'"\\q"')),
        ("truncated-unicode-escape", valid.replace(b'"hi"', b'"\\u12"')),
    ]
    for name, body in raw:
        yield Case(client, name, body, json_words)

    # Bodies in another content type, labelled as such.
    yield Case(
        client,
        "form-urlencoded",
        b"model=m&messages=hi&max_tokens=16",
        json_words,
        content_type="application/x-www-form-urlencoded",
    )
    yield Case(
        client,
        "multipart",
        b'--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--b--\r\n',
        json_words,
        content_type="multipart/form-data; boundary=b",
    )
    yield Case(client, "text-plain", b"hello, model", json_words, content_type="text/plain")
    # Valid JSON labelled as plain text: the providers judge the label, not the bytes.
    yield Case(
        client,
        "json-as-text-plain",
        _dump(base(client)),
        ("content-type",),
        content_type="text/plain",
    )
    yield Case(
        client, "xml", b"<request><model>m</model></request>", json_words, content_type="text/xml"
    )

    # Size: over the limit with and without a content-length; a huge string over it.
    over = _set(base(client), _first_text_path(client), "x" * (limit + 1024))
    yield Case(client, "oversized", _dump(over), ("exceeds", "large"), status=413)
    yield Case(
        client, "oversized-chunked", _dump(over), ("exceeds", "large"), status=413, chunked=True
    )
    yield Case(
        client,
        "oversized-garbage",
        b"\xff" * (limit + 1),
        ("exceeds", "large"),
        status=413,
    )

    # Nesting: arrays and objects far deeper than any real request.
    deep = ("nested", "deep", "recursion", "depth")
    for depth in (2_000, 50_000):
        arrays = b"[" * depth + b"]" * depth
        yield Case(client, f"nested-arrays-{depth}", valid[:-1] + b',"x":' + arrays + b"}", deep)
    objects = b'{"a":' * 20_000 + b"1" + b"}" * 20_000
    yield Case(client, "nested-objects-20000", valid[:-1] + b',"metadata":' + objects + b"}", deep)
    nested_content = b"[" * 5_000 + b"]" * 5_000
    yield Case(
        client,
        "nested-in-content",
        valid.replace(b'"hi"', nested_content),
        (*deep, "content", "expected"),
    )
    unclosed = b"[" * 100_000
    yield Case(client, "nested-unclosed", valid[:-1] + b',"x":' + unclosed, (*deep, *json_words))

    if client == GEMINI:
        return  # its model is in the URL; its settings are in generationConfig (below)
    # The model field: the one thing every protocol routes on.
    m = ("model",)
    yield Case(client, "model-missing", _dump(_set(base(client), ("model",), DELETE)), m)
    for label, value in [
        ("int", 42),
        ("null", None),
        ("empty", ""),
        ("list", ["m"]),
        ("object", {"name": "m"}),
        ("bool", True),
    ]:
        yield Case(client, f"model-{label}", _dump(_set(base(client), ("model",), value)), m)
    yield Case(client, "stream-string", _dump(_set(base(client), ("stream",), "yes")), ("stream",))
    yield Case(client, "stream-object", _dump(_set(base(client), ("stream",), {})), ("stream",))
    # Numbers JSON can write but no API accepts.
    yield Case(
        client,
        "temperature-overflow",
        valid[:-1] + b',"temperature":1e999}',
        ("temperature", "finite", "range", "number"),
    )
    yield Case(
        client,
        "temperature-huge-negative",
        valid[:-1] + b',"temperature":-1e999}',
        ("temperature", "finite", "range", "number"),
    )
    # A huge string where a number goes (fits in the limit).
    yield Case(
        client,
        "temperature-huge-string",
        _dump(_set(base(client), ("temperature",), HUGE)),
        ("temperature",),
    )


def _first_text_path(client: str) -> tuple[Any, ...]:
    if client == GEMINI:
        return ("contents", 0, "parts", 0, "text")
    return ("input", 0, "content") if client == RESPONSES else ("messages", 0, "content")


# --------------------------------------------------------------------- Chat


def _chat_cases() -> Iterator[Case]:
    b = base(CHAT)

    def case(
        name: str,
        path: tuple[Any, ...],
        value: Any,
        needles: tuple[str, ...],
        *,
        doc: dict[str, Any] | None = None,
        only: tuple[str, ...] | None = None,
    ) -> Case:
        return Case(CHAT, name, _dump(_set(doc or b, path, value)), needles, only=only)

    msgs = ("messages",)
    yield case("messages-missing", ("messages",), DELETE, msgs)
    yield case("messages-empty", ("messages",), [], msgs)
    for label, value in [("string", "hi"), ("object", {}), ("int", 1), ("null", None)]:
        yield case(f"messages-{label}", ("messages",), value, msgs)
    for label, value in [("string", "hi"), ("int", 1), ("list", []), ("null", None)]:
        yield case(f"message-{label}", ("messages", 0), value, msgs)
    role = ("role", "messages[0]")
    for label, value in [
        ("int", 1),
        ("null", None),
        ("unknown", "robot"),
        ("empty", ""),
        ("uppercase", "USER"),
        ("huge", HUGE),
    ]:
        yield case(f"role-{label}", ("messages", 0, "role"), value, role)
    yield case("role-missing", ("messages", 0, "role"), DELETE, role)
    content = ("content",)
    yield case("content-missing", ("messages", 0, "content"), DELETE, content)
    for label, value in [
        ("int", 1),
        ("object", {"text": "hi"}),
        ("bool", True),
        ("empty-list", []),
        ("list-of-int", [1]),
        ("list-of-string", ["hi"]),
        ("part-unknown-type", [{"type": "video", "video": "x"}]),
        ("part-no-type", [{"text": "hi"}]),
        ("text-missing", [{"type": "text"}]),
        ("text-int", [{"type": "text", "text": 1}]),
        ("image-missing-url", [{"type": "image_url"}]),
        ("image-url-int", [{"type": "image_url", "image_url": {"url": 1}}]),
        ("image-url-no-url", [{"type": "image_url", "image_url": {}}]),
        ("file-empty", [{"type": "file", "file": {}}]),
        ("file-not-object", [{"type": "file", "file": "abc"}]),
    ]:
        yield case(f"content-{label}", ("messages", 0, "content"), value, content)
    # Bad base64 and malformed data URLs.
    image = ("image", "base64", "data url", "content")
    for label, url in [
        ("bad-base64", "data:image/png;base64,@@@not base64@@@"),
        ("data-url-no-comma", "data:image/png;base64"),
    ]:
        yield case(
            f"image-{label}",
            ("messages", 0, "content"),
            [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": url}}],
            image,
        )
    yield case(
        "file-bad-base64",
        ("messages", 0, "content"),
        [
            {
                "type": "file",
                "file": {"file_data": "data:application/pdf;base64,%%%%", "filename": "a.pdf"},
            }
        ],
        ("file", "base64", "content"),
    )

    # Tool messages and calls.
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
    convo = {**b, "messages": [{"role": "user", "content": "go"}, call, result]}
    ids = ("tool", "call_")
    yield case(
        "tool-result-without-call",
        ("messages",),
        [{"role": "user", "content": "go"}, result],
        ids,
        doc=convo,
    )
    yield case(
        "tool-result-mismatched-id", ("messages", 2, "tool_call_id"), "call_2", ids, doc=convo
    )
    yield case("tool-result-first", ("messages",), [result], ids, doc=convo)
    yield case(
        "tool-call-id-missing",
        ("messages", 2, "tool_call_id"),
        DELETE,
        ("tool_call_id",),
        doc=convo,
    )
    yield case("tool-call-id-int", ("messages", 2, "tool_call_id"), 7, ("tool_call_id",), doc=convo)
    tc = ("tool_calls",)
    for label, value in [
        ("string", "x"),
        ("list-of-int", [1]),
        ("id-missing", [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]),
        ("id-int", [{"id": 1, "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
        ("function-missing", [{"id": "call_1", "type": "function"}]),
        ("name-missing", [{"id": "call_1", "type": "function", "function": {"arguments": "{}"}}]),
        (
            "arguments-int",
            [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": 1}}],
        ),
        (
            "arguments-object",
            [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": {"a": 1}},
                }
            ],
        ),
        (
            "unknown-type",
            [{"id": "call_1", "type": "bogus", "function": {"name": "f", "arguments": "{}"}}],
        ),
    ]:
        yield case(f"tool-calls-{label}", ("messages", 1, "tool_calls"), value, tc, doc=convo)
    # Arguments Anthropic must parse into an object.
    for label, args in [
        ("not-json", "{not json"),
        ("json-array", "[1, 2]"),
        ("truncated", '{"a": '),
    ]:
        yield case(
            f"tool-arguments-{label}",
            ("messages", 1, "tool_calls", 0, "function", "arguments"),
            args,
            ("arguments",),
            doc=convo,
            only=(ANTHROPIC,),
        )

    # Scalars of the wrong type.
    for path, label, value in [
        (("temperature",), "string", "hot"),
        (("temperature",), "list", [1]),
        (("top_p",), "string", "x"),
        (("max_tokens",), "string", "10"),
        (("max_tokens",), "float", 1.5),
        (("max_completion_tokens",), "string", "x"),
        (("n",), "string", "2"),
        (("stop",), "int", 1),
        (("stop",), "list-of-int", [1]),
        (("stop",), "object", {}),
        (("parallel_tool_calls",), "string", "yes"),
        (("logprobs",), "string", "yes"),
        (("top_logprobs",), "string", "x"),
        (("user",), "int", 1),
        (("metadata",), "string", "x"),
        (("metadata",), "int-value", {"k": 1}),
        (("stream_options",), "string", "x"),
        (("reasoning_effort",), "int", 1),
        (("service_tier",), "int", 1),
        (("prompt_cache_key",), "int", 1),
        (("response_format",), "string", "json"),
        (("response_format",), "no-type", {}),
        (("response_format",), "unknown-type", {"type": "yaml"}),
        (("response_format",), "schema-missing", {"type": "json_schema"}),
        (("tool_choice",), "int", 1),
        (("tool_choice",), "unknown-string", "sometimes"),
        (("tool_choice",), "function-missing", {"type": "function"}),
        (("tool_choice",), "name-missing", {"type": "function", "function": {}}),
        (("tool_choice",), "unknown-type", {"type": "bogus"}),
    ]:
        yield case(f"{path[-1]}-{label}", path, value, (path[-1],))
    tools = ("tools",)
    for label, value in [
        ("string", "x"),
        ("object", {"type": "function"}),
        ("list-of-int", [1]),
        ("function-missing", [{"type": "function"}]),
        ("name-missing", [{"type": "function", "function": {}}]),
        ("name-int", [{"type": "function", "function": {"name": 1}}]),
        ("parameters-string", [{"type": "function", "function": {"name": "f", "parameters": "x"}}]),
        ("parameters-list", [{"type": "function", "function": {"name": "f", "parameters": []}}]),
    ]:
        yield case(f"tools-{label}", ("tools",), value, tools)


# ---------------------------------------------------------------- Responses


def _responses_cases() -> Iterator[Case]:
    b = base(RESPONSES)

    def case(
        name: str,
        path: tuple[Any, ...],
        value: Any,
        needles: tuple[str, ...],
        *,
        doc: dict[str, Any] | None = None,
        only: tuple[str, ...] | None = None,
    ) -> Case:
        return Case(RESPONSES, name, _dump(_set(doc or b, path, value)), needles, only=only)

    inp = ("input",)
    for label, value in [
        ("int", 1),
        ("object", {"role": "user", "content": "hi"}),
        ("bool", True),
        ("list-of-int", [1]),
        ("list-of-string", ["hi"]),
        ("list-of-list", [[]]),
        ("item-unknown-type", [{"type": "bogus_item"}]),
        ("item-type-int", [{"type": 1}]),
    ]:
        yield case(f"input-{label}", ("input",), value, inp)
    role = ("role", "input[0]")
    for label, value in [
        ("unknown", "robot"),
        ("tool", "tool"),
        ("int", 1),
        ("empty", ""),
        ("huge", HUGE),
    ]:
        yield case(f"role-{label}", ("input", 0, "role"), value, role)
    content = ("content",)
    yield case("content-missing", ("input", 0, "content"), DELETE, content)
    for label, value in [
        ("int", 1),
        ("object", {"type": "input_text", "text": "hi"}),
        ("null", None),
        ("list-of-int", [1]),
        ("list-of-string", ["hi"]),
        ("part-unknown-type", [{"type": "input_video"}]),
        ("part-no-type", [{"text": "hi"}]),
        ("text-missing", [{"type": "input_text"}]),
        ("text-int", [{"type": "input_text", "text": 1}]),
        ("image-empty", [{"type": "input_image"}]),
        ("image-url-int", [{"type": "input_image", "image_url": 1}]),
        ("file-empty", [{"type": "input_file"}]),
    ]:
        yield case(f"content-{label}", ("input", 0, "content"), value, content)
    image = ("image", "base64", "data url", "content")
    for label, url in [
        ("bad-base64", "data:image/png;base64,@@@not base64@@@"),
        ("data-url-no-comma", "data:image/png;base64"),
    ]:
        yield case(
            f"image-{label}",
            ("input", 0, "content"),
            [{"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": url}],
            image,
        )
    yield case(
        "file-bad-base64",
        ("input", 0, "content"),
        [
            {
                "type": "input_file",
                "file_data": "data:application/pdf;base64,%%%%",
                "filename": "a.pdf",
            }
        ],
        ("file", "base64", "content"),
    )

    call = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
    convo = {**b, "input": [{"role": "user", "content": "go"}, call, output]}
    ids = ("call", "output")
    yield case(
        "tool-result-without-call",
        ("input",),
        [{"role": "user", "content": "go"}, output],
        ids,
        doc=convo,
    )
    yield case("tool-result-mismatched-id", ("input", 2, "call_id"), "call_2", ids, doc=convo)
    yield case("tool-result-first", ("input",), [output], ids, doc=convo)
    custom_out = {"type": "custom_tool_call_output", "call_id": "ct_1", "output": "ok"}
    yield case(
        "custom-result-without-call",
        ("input",),
        [{"role": "user", "content": "go"}, custom_out],
        ids,
        doc=convo,
    )
    for label, path, value, needles in [
        ("call-id-missing", ("input", 1, "call_id"), DELETE, ("call_id",)),
        ("call-id-int", ("input", 1, "call_id"), 1, ("call_id",)),
        ("call-name-missing", ("input", 1, "name"), DELETE, ("name",)),
        ("call-arguments-missing", ("input", 1, "arguments"), DELETE, ("arguments",)),
        ("call-arguments-int", ("input", 1, "arguments"), 1, ("arguments",)),
        ("call-arguments-object", ("input", 1, "arguments"), {"a": 1}, ("arguments",)),
        ("output-call-id-missing", ("input", 2, "call_id"), DELETE, ("call_id",)),
        ("output-missing", ("input", 2, "output"), DELETE, ("output",)),
        ("output-int", ("input", 2, "output"), 1, ("output",)),
        ("output-part-unknown", ("input", 2, "output"), [{"type": "bogus"}], ("output",)),
    ]:
        yield case(f"tool-{label}", path, value, needles, doc=convo)
    for label, args in [
        ("not-json", "{not json"),
        ("json-array", "[1, 2]"),
        ("truncated", '{"a": '),
    ]:
        yield case(
            f"tool-arguments-{label}",
            ("input", 1, "arguments"),
            args,
            ("arguments",),
            doc=convo,
            only=(ANTHROPIC,),
        )
    reasoning_item = {"type": "reasoning", "summary": "thought"}
    yield case(
        "reasoning-summary-string",
        ("input",),
        [reasoning_item, {"role": "user", "content": "hi"}],
        ("summary",),
    )

    for path, label, value in [
        (("instructions",), "int", 1),
        (("instructions",), "list", ["be brief"]),
        (("max_output_tokens",), "string", "x"),
        (("max_output_tokens",), "float", 2.5),
        (("temperature",), "string", "hot"),
        (("top_p",), "list", [1]),
        (("parallel_tool_calls",), "string", "yes"),
        (("metadata",), "string", "x"),
        (("metadata",), "int-value", {"k": 1}),
        (("user",), "int", 1),
        (("safety_identifier",), "int", 1),
        (("prompt_cache_key",), "int", 1),
        (("service_tier",), "list", []),
        (("store",), "string", "no"),
        (("text",), "string", "json"),
        (("text",), "format-string", {"format": "json"}),
        (("text",), "format-unknown", {"format": {"type": "yaml"}}),
        (("reasoning",), "string", "high"),
        (("reasoning",), "effort-int", {"effort": 1}),
        (("tool_choice",), "int", 1),
        (("tool_choice",), "unknown-string", "sometimes"),
        (("tool_choice",), "name-missing", {"type": "function"}),
        (("tool_choice",), "type-missing", {"name": "f"}),
    ]:
        yield case(f"{path[-1]}-{label}", path, value, (path[-1],))
    tools = ("tools",)
    for label, value in [
        ("string", "x"),
        ("object", {"type": "function", "name": "f"}),
        ("list-of-int", [1]),
        ("type-missing", [{"name": "f"}]),
        ("type-int", [{"type": 1, "name": "f"}]),
        ("name-missing", [{"type": "function"}]),
        ("name-int", [{"type": "function", "name": 1}]),
        ("parameters-string", [{"type": "function", "name": "f", "parameters": "x"}]),
        ("custom-name-missing", [{"type": "custom"}]),
    ]:
        yield case(f"tools-{label}", ("tools",), value, tools)


# ---------------------------------------------------------------- Anthropic


def _anthropic_cases() -> Iterator[Case]:
    b = base(ANTHROPIC)

    def case(
        name: str,
        path: tuple[Any, ...],
        value: Any,
        needles: tuple[str, ...],
        *,
        doc: dict[str, Any] | None = None,
        only: tuple[str, ...] | None = None,
    ) -> Case:
        return Case(ANTHROPIC, name, _dump(_set(doc or b, path, value)), needles, only=only)

    yield case("max-tokens-missing", ("max_tokens",), DELETE, ("max_tokens",))
    for label, value in [("string", "16"), ("float", 1.5), ("null", None)]:
        yield case(f"max-tokens-{label}", ("max_tokens",), value, ("max_tokens",))
    msgs = ("messages",)
    yield case("messages-missing", ("messages",), DELETE, msgs)
    yield case("messages-empty", ("messages",), [], msgs)
    for label, value in [("string", "hi"), ("object", {}), ("int", 1), ("null", None)]:
        yield case(f"messages-{label}", ("messages",), value, msgs)
    for label, value in [("string", "hi"), ("int", 1), ("list", [])]:
        yield case(f"message-{label}", ("messages", 0), value, msgs)
    role = ("role", "messages[0]")
    for label, value in [
        ("unknown", "robot"),
        ("tool", "tool"),
        ("developer", "developer"),
        ("int", 1),
        ("null", None),
        ("huge", HUGE),
    ]:
        yield case(f"role-{label}", ("messages", 0, "role"), value, role)
    yield case("role-missing", ("messages", 0, "role"), DELETE, role)
    content = ("content",)
    yield case("content-missing", ("messages", 0, "content"), DELETE, content)
    for label, value in [
        ("int", 1),
        ("null", None),
        ("object", {"type": "text", "text": "hi"}),
        ("empty-string", ""),
        ("empty-list", []),
        ("empty-text-block", [{"type": "text", "text": ""}]),
        ("list-of-int", [1]),
        ("list-of-string", ["hi"]),
        ("block-unknown-type", [{"type": "video"}]),
        ("block-no-type", [{"text": "hi"}]),
        ("text-missing", [{"type": "text"}]),
        ("text-int", [{"type": "text", "text": 1}]),
        ("image-no-source", [{"type": "image"}]),
        ("image-source-unknown", [{"type": "image", "source": {"type": "ftp", "url": "x"}}]),
        ("image-url-int", [{"type": "image", "source": {"type": "url", "url": 1}}]),
        (
            "image-data-missing",
            [{"type": "image", "source": {"type": "base64", "media_type": "image/png"}}],
        ),
        ("document-no-source", [{"type": "document"}]),
        (
            "tool-use-in-user-turn",
            [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
        ),
    ]:
        yield case(f"content-{label}", ("messages", 0, "content"), value, content)
    image = ("image", "base64", "data", "content")
    for label, data in [
        ("bad-base64", "@@@not base64@@@"),
    ]:
        yield case(
            f"image-{label}",
            ("messages", 0, "content"),
            [
                {"type": "text", "text": "see"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                },
            ],
            image,
        )
    yield case(
        "document-bad-base64",
        ("messages", 0, "content"),
        [
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "%%%%"},
            }
        ],
        ("document", "base64", "data", "content"),
    )

    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    res = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    convo = {
        **b,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [res]},
        ],
    }
    ids = ("tool_use", "tool_result", "toolu_")
    yield case(
        "tool-result-without-call",
        ("messages",),
        [{"role": "user", "content": [res]}],
        ids,
        doc=convo,
    )
    yield case(
        "tool-result-mismatched-id",
        ("messages", 2, "content", 0, "tool_use_id"),
        "toolu_2",
        ids,
        doc=convo,
    )
    yield case("tool-result-in-assistant-turn", ("messages", 1, "content"), [res], ids, doc=convo)
    for label, path, value, needles in [
        ("use-id-missing", ("messages", 1, "content", 0, "id"), DELETE, ("id",)),
        ("use-id-int", ("messages", 1, "content", 0, "id"), 1, ("id",)),
        ("use-name-missing", ("messages", 1, "content", 0, "name"), DELETE, ("name",)),
        ("use-input-missing", ("messages", 1, "content", 0, "input"), DELETE, ("input",)),
        ("use-input-string", ("messages", 1, "content", 0, "input"), "{}", ("input",)),
        ("use-input-list", ("messages", 1, "content", 0, "input"), [1], ("input",)),
        (
            "result-id-missing",
            ("messages", 2, "content", 0, "tool_use_id"),
            DELETE,
            ("tool_use_id",),
        ),
        ("result-id-int", ("messages", 2, "content", 0, "tool_use_id"), 1, ("tool_use_id",)),
        ("result-content-int", ("messages", 2, "content", 0, "content"), 1, ("content",)),
        ("result-is-error-string", ("messages", 2, "content", 0, "is_error"), "yes", ("is_error",)),
    ]:
        yield case(f"tool-{label}", path, value, needles, doc=convo)

    for path, label, value in [
        (("system",), "int", 1),
        (("system",), "list-of-int", [1]),
        (("system",), "block-no-text", [{"type": "text"}]),
        (("temperature",), "string", "hot"),
        (("top_p",), "list", [1]),
        (("top_k",), "string", "x"),
        (("top_k",), "float", 2.5),
        (("stop_sequences",), "string", "STOP"),
        (("stop_sequences",), "list-of-int", [1]),
        (("metadata",), "string", "x"),
        (("metadata",), "user-id-int", {"user_id": 1}),
        (("service_tier",), "int", 1),
        (("tool_choice",), "string", "auto"),
        (("tool_choice",), "unknown-type", {"type": "bogus"}),
        (("tool_choice",), "type-missing", {"name": "f"}),
        (("tool_choice",), "name-missing", {"type": "tool"}),
        (("thinking",), "string", "on"),
        (("thinking",), "unknown-type", {"type": "bogus"}),
        (("thinking",), "budget-string", {"type": "enabled", "budget_tokens": "x"}),
        (("output_config",), "string", "x"),
        (("output_config",), "effort-unknown", {"effort": "extreme"}),
        (("output_config",), "format-no-schema", {"format": {"type": "json_schema"}}),
    ]:
        yield case(f"{path[-1]}-{label}", path, value, (path[-1],))
    tools = ("tools",)
    for label, value in [
        ("string", "x"),
        ("object", {"name": "f", "input_schema": {"type": "object"}}),
        ("list-of-int", [1]),
        ("name-missing", [{"input_schema": {"type": "object"}}]),
        ("name-int", [{"name": 1, "input_schema": {"type": "object"}}]),
        ("schema-missing", [{"name": "f"}]),
        ("schema-string", [{"name": "f", "input_schema": "object"}]),
        ("type-int", [{"type": 1, "name": "f"}]),
    ]:
        yield case(f"tools-{label}", ("tools",), value, tools)


def _gemini_cases() -> Iterator[Case]:
    b = base(GEMINI)
    call = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}

    def case(
        name: str, path: tuple[Any, ...], value: Any, needles: tuple[str, ...], **kw: Any
    ) -> Case:
        return Case(GEMINI, name, _dump(_set(kw.get("doc") or b, path, value)), needles)

    contents = ("contents",)
    yield case("contents-missing", contents, DELETE, contents)
    yield case("contents-empty", contents, [], contents)
    for label, value in [("string", "hi"), ("object", {}), ("int", 1), ("null", None)]:
        yield case(f"contents-{label}", contents, value, contents)
    for label, value in [("string", "hi"), ("int", 1), ("list", [])]:
        yield case(f"content-{label}", ("contents", 0), value, contents)
    for label, value in [("unknown", "assistant"), ("system", "system"), ("int", 1)]:
        yield case(f"role-{label}", ("contents", 0, "role"), value, ("role",))
    for label, value in [("string", "hi"), ("object", {}), ("int", 1)]:
        yield case(f"parts-{label}", ("contents", 0, "parts"), value, ("parts",))
    for label, value in [("int", 1), ("list", ["hi"]), ("object", {"t": 1})]:
        yield case(f"text-{label}", ("contents", 0, "parts", 0, "text"), value, ("text",))
    part = ("contents", 0, "parts", 0)
    yield case(
        "inline-data-int", part, {"inlineData": {"mimeType": "image/png", "data": 1}}, ("data",)
    )
    yield case(
        "function-call-args-string", part, {"functionCall": {"name": "f", "args": "{}"}}, ("args",)
    )
    yield case(
        "function-call-in-user-turn",
        part,
        {"functionCall": {"name": "f", "args": {}}},
        ("functioncall",),
    )
    with_call = {"contents": [b["contents"][0], call, answer]}
    yield case(
        "function-response-in-model-turn",
        ("contents", 1, "parts", 0),
        {"functionResponse": {"name": "f", "response": {}}},
        ("functionresponse",),
        doc=with_call,
    )
    yield case(
        "function-response-answers-no-call",
        ("contents", 2, "parts", 0, "functionResponse", "id"),
        "call_nowhere",
        ("call_nowhere", "tool"),
        doc=with_call,
    )
    system = ("systemInstruction",)
    yield case("system-string", system, "be brief", ("systeminstruction",))
    yield case(
        "system-function-call",
        system,
        {"parts": [{"functionCall": {"name": "f"}}]},
        ("systeminstruction", "text"),
    )
    tools = ("tools",)
    for label, value in [
        ("string", "x"),
        ("object", {"functionDeclarations": []}),
        ("declarations-string", [{"functionDeclarations": "f"}]),
        ("name-missing", [{"functionDeclarations": [{"description": "d"}]}]),
        ("name-int", [{"functionDeclarations": [{"name": 1}]}]),
        ("parameters-string", [{"functionDeclarations": [{"name": "f", "parameters": "object"}]}]),
    ]:
        yield case(
            f"tools-{label}", tools, value, ("tools", "functiondeclarations", "name", "parameters")
        )
    mode = ("toolConfig",)
    yield case(
        "tool-config-mode-unknown",
        mode,
        {"functionCallingConfig": {"mode": "SOMETIMES"}},
        ("mode",),
    )
    yield case("tool-config-mode-int", mode, {"functionCallingConfig": {"mode": 1}}, ("mode",))
    gen = ("generationConfig",)
    for label, value, needle in [
        ("string", "x", "generationconfig"),
        ("max-output-string", {"maxOutputTokens": "16"}, "maxoutputtokens"),
        ("temperature-string", {"temperature": "hot"}, "temperature"),
        ("stop-string", {"stopSequences": "END"}, "stopsequences"),
        ("candidate-count-2", {"candidateCount": 2}, "candidatecount"),
        ("modalities-image", {"responseModalities": ["IMAGE"]}, "responsemodalities"),
        (
            "thinking-budget-string",
            {"thinkingConfig": {"thinkingBudget": "lots"}},
            "thinkingbudget",
        ),
    ]:
        yield case(f"generation-config-{label}", gen, value, (needle,))
    yield case("cached-content", ("cachedContent",), "cachedContents/abc", ("cachedcontent",))
    yield case("safety-settings-string", ("safetySettings",), "none", ("safetysettings",))


def _provider_rejections() -> Iterator[Case]:
    """Requests valid in shape that the client's own provider rejects with a 400 (issue
    13 §4) — the proxy used to clamp, drop or forward them changed. Each is sent
    streamed and not."""
    hi = {"role": "user", "content": "hi"}
    answer = {"role": "assistant", "content": "a"}
    bmp_part = {"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}}
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    fn = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    chat: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("temperature-5", {"temperature": 5}, ("temperature",)),
        ("temperature-negative", {"temperature": -1}, ("temperature",)),
        ("top-p-1.5", {"top_p": 1.5}, ("top_p",)),
        ("n-0", {"n": 0}, ("'n'",)),
        ("effort-extreme", {"reasoning_effort": "extreme"}, ("extreme",)),
        ("tool-unknown-type", {"tools": [{"type": "robot", "robot": {}}]}, ("robot",)),
        (
            "tool-choice-unknown-tool",
            {"tools": [fn], "tool_choice": {"type": "function", "function": {"name": "g"}}},
            ("tool_choice",),
        ),
        (
            "assistant-empty",
            {"messages": [hi, {"role": "assistant"}, hi]},
            ("assistant",),
        ),
        (
            "tool-call-without-result",
            {"tools": [fn], "messages": [hi, {"role": "assistant", "tool_calls": [call]}, hi]},
            ("call_1",),
        ),
        ("user-empty", {"messages": [hi, answer, {"role": "user", "content": ""}]}, ("empty",)),
        ("system-only", {"messages": [{"role": "system", "content": "be brief"}]}, ("user",)),
        (
            "image-bmp",
            {"messages": [{"role": "user", "content": [bmp_part]}]},
            ("image/bmp",),
        ),
    ]  # fmt: skip
    responses: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("temperature-5", {"temperature": 5}, ("temperature",)),
        ("effort-extreme", {"reasoning": {"effort": "extreme"}}, ("extreme",)),
        ("input-empty", {"input": []}, ("input",)),
        (
            "image-bmp",
            {
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": "data:image/bmp;base64,Qk0="}
                        ],
                    }
                ]
            },
            ("image/bmp",),
        ),
        (
            "output-text-in-user-message",
            {"input": [{"role": "user", "content": [{"type": "output_text", "text": "hi"}]}]},
            ("output_text",),
        ),
        (
            "function-call-without-output",
            {
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
                ]
            },
            ("call_1",),
        ),
        ("tool-unknown-type", {"tools": [{"type": "robot"}]}, ("robot",)),
        (
            "tool-choice-unknown-tool",
            {
                "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
                "tool_choice": {"type": "function", "name": "g"},
            },
            ("tool_choice",),
        ),
    ]
    bmp = {"type": "base64", "media_type": "image/bmp", "data": "Qk0="}
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    anthropic: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("temperature-5", {"temperature": 5}, ("temperature",)),
        ("tool-unknown-type", {"tools": [{"type": "robot", "name": "r"}]}, ("robot",)),
        ("thinking-without-budget", {"thinking": {"type": "enabled"}}, ("budget_tokens",)),
        ("thinking-budget-100", {"thinking": {"type": "enabled", "budget_tokens": 100}}, ("1024",)),
        (
            "image-bmp",
            {"messages": [{"role": "user", "content": [{"type": "image", "source": bmp}]}]},
            ("media_type",),
        ),
        (
            "tool-use-without-result",
            {
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "messages": [
                    hi,
                    {"role": "assistant", "content": [use]},
                    {"role": "user", "content": "go on"},
                ],
            },
            ("tool_result",),
        ),
        (
            "tool-choice-unknown-tool",
            {
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "tool", "name": "g"},
            },
            ("tool_choice",),
        ),
    ]
    for client, cases in ((CHAT, chat), (RESPONSES, responses), (ANTHROPIC, anthropic)):
        for name, fields, needles in cases:
            for stream in (False, True):
                doc = {**base(client), **fields, **({"stream": True} if stream else {})}
                label = f"rejected-{name}{'-stream' if stream else ''}"
                yield Case(client, label, _dump(doc), needles)


def generate(limit: int) -> list[Case]:
    """The whole corpus for a proxy with ``max_body_size=limit``."""
    out: list[Case] = []
    for client in CLIENTS:
        out.extend(_raw_cases(client, limit))
    out.extend(_chat_cases())
    out.extend(_responses_cases())
    out.extend(_anthropic_cases())
    out.extend(_gemini_cases())
    out.extend(_provider_rejections())
    ids = [c.id for c in out]
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, f"duplicate case ids: {dupes}"
    return out


if __name__ == "__main__":
    corpus = generate(1 << 20)
    for p in CLIENTS:
        print(p, sum(1 for c in corpus if c.client == p))
    print("total", len(corpus))
