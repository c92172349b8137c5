"""Web search results between protocols, per codec and for the shared kit
(``protocols/_kit/search_results.py``): the placeholders an Anthropic client replays,
citation spans between characters and UTF-8 bytes, the order of a search and the text
that cites it in an Anthropic client's stream, Gemini grounding both ways, and the
searches counted in usage (Gemini pass-through included)."""

from __future__ import annotations

import json

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import fold, unfold
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols._kit import search_results as sr
from proxai_asgi.protocols.anthropic_messages.search_stream import SearchHold
from proxai_asgi.protocols.gemini_generate_content import grounding
from proxai_asgi.sse import SSEDecoder
from proxai_asgi.stream_tail import StreamTail
from tests.helpers import search_answers as sa
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_gemini import check_grounding
from tests.helpers.validate_responses import validate_responses_stream

HIT = c.SearchHit(url="https://p.example/a", title="Page — A", snippet="words " * 10)
SEARCH = c.ServerToolUse(id="s1", name="web_search", input={"query": "q"}, hits=[HIT])


def _request(search: bool = True, results_last: bool = True) -> c.Request:
    """A request that offered search (or not); ``results_last``: as the translation
    marks it for an upstream whose search results come after the text (Gemini)."""
    return c.Request(
        model="m",
        messages=[],
        web_search=c.WebSearch() if search else None,
        search_results_last=search and results_last,
    )


def _decode_stream(protocol: str, body: bytes) -> list[c.StreamEvent]:
    dec = get_codec(protocol).stream_decoder()  # type: ignore[arg-type]
    events: list[c.StreamEvent] = []
    for e in SSEDecoder().decode(body):
        events += dec.feed(e)
    return events + dec.close()


def _encode_stream(protocol: str, events: list[c.StreamEvent], request: c.Request) -> bytes:
    enc = get_codec(protocol).stream_encoder(request)  # type: ignore[arg-type]
    return b"".join(enc.encode(e) for e in events)


# ------------------------------------------------------------------ the kit


def test_a_content_placeholder_gives_back_its_page_and_is_recognised() -> None:
    token = sr.content_placeholder(HIT)
    assert token.startswith(sr.CONTENT_PREFIX) and sr.is_placeholder(token)
    assert sr.hit_from_placeholder(token) == HIT
    assert sr.is_placeholder(sr.index_placeholder(c.Citation(url=HIT.url)))
    assert not sr.is_placeholder("EqAnthropicOwnToken")
    assert sr.hit_from_placeholder("EqAnthropicOwnToken") is None
    assert sr.hit_from_placeholder(sr.CONTENT_PREFIX + "!!not base64") is None
    # An upstream's own token is what the client gets back, never replaced.
    assert sr.encrypted_content(c.SearchHit(url="u", encrypted_content="Eq1")) == "Eq1"


def test_a_placeholder_carries_a_long_snippet_only_so_far() -> None:
    long = c.SearchHit(url="u", snippet="x" * 10_000)
    got = sr.hit_from_placeholder(sr.content_placeholder(long))
    assert got is not None and got.snippet is not None and len(got.snippet) == 2000


@pytest.mark.parametrize(
    ("cite", "span"),
    [
        (c.Citation(url="u", start_index=2, end_index=5), (2, 5)),
        (c.Citation(url="u", cited_text="bcd"), (2, 5)),
        (c.Citation(url="u", cited_text="a quote from the page"), (0, 9)),
        (c.Citation(url="u"), (0, 9)),
        (c.Citation(url="u", start_index=4, end_index=99), (4, 9)),
    ],
)
def test_a_citation_spans_its_offsets_else_its_cited_text_else_the_whole_text(
    cite: c.Citation, span: tuple[int, int]
) -> None:
    assert sr.span_of("a bcd — e", cite) == span


def test_byte_and_character_offsets_map_both_ways_across_multibyte_text() -> None:
    text = "née — 😀 ok"
    for i in range(len(text) + 1):
        assert sr.char_offset(text.encode(), sr.byte_offset(text, i)) == i
    assert sr.char_offset("é".encode(), 1) == 0  # a cut inside a character


# --------------------------------------------------- ordering for Anthropic


def _late_grounding() -> list[c.StreamEvent]:
    """Text, its citations, then the search: how a Gemini stream says it."""
    return [
        c.MessageStart(id="g", model="m"),
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text="Otters hold hands."),
        c.Citations(index=0, citations=[c.Citation(url=HIT.url, start_index=7, end_index=17)]),
        c.BlockStop(index=0),
        c.ServerTool(index=1, use=SEARCH),
        c.Finish(stop_reason="end_turn", usage=c.Usage(input_tokens=1, output_tokens=1)),
    ]


def test_an_anthropic_client_with_search_gets_the_search_before_the_text_citing_it() -> None:
    body = _encode_stream("anthropic_messages", _late_grounding(), _request())
    s = validate_anthropic_stream(body)
    assert [b.type for b in s.blocks] == ["server_tool_use", "web_search_tool_result", "text"]
    [cite] = s.blocks[2].citations
    assert cite["cited_text"] == "hold hands"  # the span's text, found from the offsets
    assert s.usage is not None and s.usage["server_tool_use"]["web_search_requests"] == 1


def test_without_a_search_tool_the_stream_is_not_held_and_stays_valid() -> None:
    enc = get_codec("anthropic_messages").stream_encoder(_request(search=False))
    events = _late_grounding()
    assert enc.encode(events[0]) and enc.encode(events[1]) == b""
    assert b"text_delta" in enc.encode(events[2])  # streamed at once
    body = b"".join(enc.encode(e) for e in events[3:])
    s = validate_anthropic_stream(_encode_stream("anthropic_messages", events, _request(False)))
    assert [b.type for b in s.blocks] == ["text", "server_tool_use", "web_search_tool_result"]
    assert body


def test_a_preamble_before_a_search_keeps_its_place() -> None:
    hold = SearchHold()
    pre = [c.BlockStart(index=0, kind="text"), c.BlockDelta(index=0, text="Let me look."),
           c.BlockStop(index=0)]  # fmt: skip
    assert [hold.take(e) for e in pre] == [[], [], []]
    assert hold.take(c.ServerTool(index=1, use=SEARCH)) == []
    after = c.BlockStart(index=2, kind="text")
    assert hold.take(after) == [*pre, c.ServerTool(index=1, use=SEARCH), after]
    assert not hold.holding


def test_an_answer_without_a_search_is_released_whole_at_its_finish() -> None:
    hold = SearchHold()
    start = c.MessageStart(id="x", model="m")
    assert hold.take(start) == [start]
    text = c.BlockStart(index=0, kind="text")
    assert hold.take(text) == []
    finish = c.Finish(stop_reason="end_turn", usage=c.Usage())
    assert hold.take(finish) == [text, finish]


# ------------------------------------------------------------------ Gemini


def test_gemini_grounding_byte_segments_become_character_spans_and_back() -> None:
    texts = ["Intro — ", "les loutres — se tiennent la main."]
    seg = "se tiennent la main."
    base = len(texts[0].encode())
    start = base + texts[1].encode().index(seg.encode())
    meta = {
        "webSearchQueries": ["loutres", "otters"],
        "groundingChunks": [{"web": {"uri": HIT.url, "title": "A"}}, {"retrievedContext": {}}],
        "groundingSupports": [
            {
                "segment": {"startIndex": start, "endIndex": start + len(seg.encode())},
                "groundingChunkIndices": [0, 1],  # the second names no page: skipped
            }
        ],
    }
    cites = grounding.citations_in(meta, texts)
    assert cites[0] == []
    [cite] = cites[1]
    assert texts[1][cite.start_index : cite.end_index] == seg  # type: ignore[misc]
    searches = grounding.searches_in(meta, "r1")
    assert [s.input for s in searches] == [{"query": "loutres"}, {"query": "otters"}]
    assert searches[0].hits == [c.SearchHit(url=HIT.url, title="A")] and searches[1].hits == []
    assert grounding.search_count(meta) == 2
    out = grounding.grounding_out(searches, list(zip(texts, cites, strict=True)))
    assert out is not None
    check_grounding("".join(texts), out)
    assert out["groundingSupports"][0]["segment"] == {
        "startIndex": start,
        "endIndex": start + len(seg.encode()),
        "text": seg,
    }


def test_gemini_supports_of_one_span_share_it_and_cited_pages_no_search_named_are_added() -> None:
    a = c.Citation(url=HIT.url, start_index=0, end_index=3)
    b = c.Citation(url="https://other", title="O", start_index=0, end_index=3)
    out = grounding.grounding_out([SEARCH], [("abc def", [a, b])])
    assert out is not None
    assert [ch["web"]["uri"] for ch in out["groundingChunks"]] == [HIT.url, "https://other"]
    assert [s["groundingChunkIndices"] for s in out["groundingSupports"]] == [[0, 1]]
    assert "loutres" not in out["searchEntryPoint"]["renderedContent"]
    assert grounding.grounding_out([], [("abc", None)]) is None


def test_a_gemini_stream_grounds_its_text_once_it_ends_and_the_search_follows() -> None:
    events = _decode_stream("gemini_generate_content", sa.gemini_sse())
    kinds = [type(e).__name__ for e in events]
    assert kinds[-4:] == ["Citations", "BlockStop", "ServerTool", "Finish"]
    r = fold(events)
    assert r.usage.server_tool_requests == 1
    assert (
        r.content[0]
        == get_codec("gemini_generate_content").decode_response(sa.gemini_json()).content[1]
    )  # the same text and spans as the plain answer


def test_the_searches_of_a_relayed_gemini_answer_are_counted() -> None:
    codec = get_codec("gemini_generate_content")
    got = codec.relayed_usage(sa.gemini_json())
    assert got is not None and got.usage.server_tool_requests == 1
    tail = StreamTail()
    tail.feed(sa.gemini_sse())
    streamed = codec.relayed_stream_usage(tail)
    assert streamed is not None and streamed.usage.server_tool_requests == 1


# --------------------------------------------------------------- Responses


def test_a_responses_client_stream_carries_the_search_item_with_its_progress() -> None:
    r = get_codec("gemini_generate_content").decode_response(sa.gemini_json())
    body = _encode_stream("openai_responses", unfold(r), _request())
    s = validate_responses_stream(body)
    assert [i["type"] for i in s.items] == ["web_search_call", "message"]
    assert s.items[0]["action"]["query"] == sa.QUERY
    [ann] = s.items[1]["content"][0]["annotations"]
    assert sa.TEXT[ann["start_index"] : ann["end_index"]] == sa.CITED


def test_an_anthropic_stream_search_is_one_server_tool_with_the_streamed_query() -> None:
    events = _decode_stream("anthropic_messages", sa.anthropic_sse())
    [tool] = [e for e in events if isinstance(e, c.ServerTool)]
    assert tool.use.input == {"query": sa.QUERY}
    assert [h.encrypted_content for h in tool.use.hits or ()] == [
        "EqAnthropicPage0",
        "EqAnthropicPage1",
    ]
    plain = get_codec("anthropic_messages").decode_response(sa.anthropic_json())
    assert fold(events).content == plain.content


def test_an_anthropic_search_error_result_is_the_searchs_error() -> None:
    body = json.loads(sa.anthropic_json())
    body["content"][2]["content"] = {
        "type": "web_search_tool_result_error",
        "error_code": "max_uses_exceeded",
    }
    r = get_codec("anthropic_messages").decode_response(json.dumps(body).encode())
    search = r.content[1]
    assert isinstance(search, c.ServerToolUse)
    assert (search.error, search.hits) == ("max_uses_exceeded", None)
    out = json.loads(get_codec("openai_responses").encode_response(r, _request()))
    assert out["output"][1]["status"] == "failed"


def test_an_anthropic_client_gets_a_folded_gemini_streams_search_before_its_cited_text() -> None:
    r = fold(_decode_stream("gemini_generate_content", sa.gemini_sse()))
    assert [type(p).__name__ for p in r.content] == ["Text", "ServerToolUse"]  # grounding last
    out = json.loads(get_codec("anthropic_messages").encode_response(r, _request()))
    assert [b["type"] for b in out["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    uncited = [c.Text(text="a"), SEARCH, c.Text(text="b")]
    assert sr.searches_first(uncited) == uncited  # nothing cited: the order is kept


@pytest.mark.parametrize("upstream", list(sa.ANSWERS))
@pytest.mark.parametrize("search", [True, False], ids=["search-tool", "no-search-tool"])
def test_an_anthropic_clients_stream_folds_to_its_plain_answer(upstream: str, search: bool) -> None:
    from tests.protocols.anthropic_messages._util import checked_stream, sdk_fold, sdk_message

    request = _request(search, get_codec(upstream).search_results_last)  # type: ignore[arg-type]
    streamed = fold(_decode_stream(upstream, sa.ANSWERS[upstream][1]()))
    raw, _ = checked_stream(unfold(streamed), request)
    plain = get_codec(upstream).decode_response(sa.ANSWERS[upstream][0]())  # type: ignore[arg-type]
    want = sdk_message(get_codec("anthropic_messages").encode_response(plain, request))
    got = sdk_fold(raw)
    if not request.search_results_last and upstream == "gemini_generate_content":
        # Unheld, a Gemini stream's search follows its text; the plain answer's leads.
        got["content"] = [*got["content"][-2:], *got["content"][:-2]]
    assert got == want


def test_an_anthropic_client_with_search_streams_at_once_when_results_come_first() -> None:
    """Only an upstream whose results come last (Gemini) makes an Anthropic client's
    answer wait: from the others a search precedes its text, so text streams at once
    (a long answer that never searches is not held to its end)."""
    assert get_codec("gemini_generate_content").search_results_last
    for upstream in ("anthropic_messages", "openai_responses", "openai_chat_completions"):
        assert not get_codec(upstream).search_results_last  # type: ignore[arg-type]
    enc = get_codec("anthropic_messages").stream_encoder(_request(results_last=False))
    events = _late_grounding()
    assert enc.encode(events[0]) and enc.encode(events[1]) == b""
    assert b"text_delta" in enc.encode(events[2])


@pytest.mark.parametrize("upstream", list(sa.ANSWERS))
def test_the_translation_marks_where_the_upstreams_results_come(upstream: str) -> None:
    from proxai_asgi import Upstream, pipeline

    body = json.dumps(
        {
            "model": "m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "news?"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        }
    ).encode()
    up = Upstream(upstream, "http://127.0.0.1:9", "k")  # type: ignore[arg-type]
    anthropic = get_codec("anthropic_messages")
    t = pipeline.prepare(anthropic, get_codec(upstream), body, up)  # type: ignore[arg-type]
    assert t.request.web_search is not None
    assert t.request.search_results_last is (upstream == "gemini_generate_content")
