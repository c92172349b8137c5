"""Cache breakpoints placed for OpenAI-protocol clients on Anthropic upstreams
(``anthropic_messages/cache_breakpoints.py``): where they go, that an agent loop's
previous request is a byte-for-byte prefix up to the new request's breakpoint, and
that a client's own breakpoints (or an Anthropic client) are left alone."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from proxai_asgi.codec import ProtocolName, UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec

EPHEMERAL = {"type": "ephemeral"}
TOOL = {
    "type": "function",
    "function": {"name": "sh", "parameters": {"type": "object", "properties": {}}},
}


def to_anthropic(
    body: dict[str, Any],
    client: ProtocolName = "openai_chat_completions",
    options: UpstreamOptions | None = None,
) -> dict[str, Any]:
    report = TranslationReport()
    request = get_codec(client).decode_request(json.dumps(body).encode(), report)
    out = get_codec("anthropic_messages").encode_request(
        request, report, options or UpstreamOptions()
    )
    result: dict[str, Any] = json.loads(out)
    return result


def chat_loop(turns: int, tools: bool = True) -> dict[str, Any]:
    """A Chat agent loop after ``turns`` tool round trips."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "List the files."},
    ]
    for n in range(turns):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "sh", "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"out {n}"})
    body: dict[str, Any] = {"model": "m", "messages": messages}
    if tools:
        body["tools"] = [TOOL]
    return body


def markers(out: dict[str, Any]) -> list[str]:
    """Where the request's breakpoints are, as paths."""
    found = [f"tools[{i}]" for i, t in enumerate(out.get("tools", [])) if "cache_control" in t]
    system = out.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, m in enumerate(out["messages"]):
        if isinstance(m["content"], list):
            found += [
                f"messages[{i}].content[{j}]"
                for j, b in enumerate(m["content"])
                if "cache_control" in b
            ]
    for path in found:
        assert eval_path(out, path)["cache_control"]["type"] == "ephemeral"
    return found


def eval_path(out: dict[str, Any], path: str) -> dict[str, Any]:
    node: Any = out
    for piece in path.replace("]", "").split("."):
        name, _, index = piece.partition("[")
        node = node[name][int(index)]
    assert isinstance(node, dict)
    return node


def test_first_turn_marks_tools_system_and_the_tail() -> None:
    out = to_anthropic(chat_loop(0))
    assert markers(out) == ["tools[0]", "system[0]", "messages[0].content[0]"]
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "List the files.", "cache_control": EPHEMERAL}
    ]


def test_agent_loop_marks_the_end_of_the_previous_turn_and_the_tail() -> None:
    out = to_anthropic(chat_loop(3))
    # user, (assistant, tool results) x 3: the previous turn ended at messages[4]
    assert markers(out) == [
        "tools[0]",
        "system[0]",
        "messages[4].content[0]",
        "messages[6].content[0]",
    ]
    assert out["messages"][6]["content"][0]["type"] == "tool_result"


def test_never_more_than_four_and_none_without_content_to_mark() -> None:
    for turns in range(6):
        assert len(markers(to_anthropic(chat_loop(turns)))) <= 4
    out = to_anthropic(chat_loop(2, tools=False))
    assert markers(out) == ["system[0]", "messages[2].content[0]", "messages[4].content[0]"]


def unmarked(node: Any) -> Any:
    """``node`` without its cache_control markers (they are not part of the prompt)."""
    if isinstance(node, dict):
        return {k: unmarked(v) for k, v in node.items() if k != "cache_control"}
    if isinstance(node, list):
        return [unmarked(v) for v in node]
    return node


def test_the_previous_request_is_a_prefix_up_to_the_new_breakpoint() -> None:
    """What turn N cached (everything up to its tail breakpoint) is, block for block,
    what turn N+1 has up to a breakpoint of its own: a cache hit."""
    for n in range(5):
        before, after = to_anthropic(chat_loop(n)), to_anthropic(chat_loop(n + 1))
        assert unmarked(after["tools"]) == unmarked(before["tools"])
        assert unmarked(after["system"]) == unmarked(before["system"])
        size = len(before["messages"])
        assert unmarked(after["messages"][:size]) == unmarked(before["messages"])
        tail = markers(before)[-1]
        assert tail == f"messages[{size - 1}].content[0]"
        assert tail in markers(after)


def test_responses_client_gets_breakpoints_too() -> None:
    body = {
        "model": "m",
        "input": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "run it"},
            {"type": "function_call", "call_id": "c1", "name": "sh", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
        ],
        "tools": [{"type": "function", "name": "sh", "parameters": {"type": "object"}}],
    }
    out = to_anthropic(body, "openai_responses")
    assert markers(out) == [
        "tools[0]",
        "system[0]",
        "messages[0].content[0]",
        "messages[2].content[0]",
    ]


def test_thinking_blocks_are_skipped_for_the_block_before_them() -> None:
    """A tail that ends in a thinking block (an assistant prefill) marks the block
    before it: thinking blocks cannot carry cache_control."""
    from proxai_asgi.protocols.anthropic_messages import cache_breakpoints, wire

    body = wire.UpstreamRequest(
        model="m",
        max_tokens=10,
        messages=[
            wire.InputMessage(role="user", content="q"),
            wire.InputMessage(
                role="assistant",
                content=[wire.TextBlock(text="a"), wire.ThinkingBlock(thinking="t", signature="s")],
            ),
        ],
    )
    assert cache_breakpoints.place(body) == 2
    out = msgspec.json.decode(msgspec.json.encode(body))
    assert markers(out) == ["messages[0].content[0]", "messages[1].content[0]"]


def test_a_clients_own_breakpoints_are_kept_and_nothing_is_added() -> None:
    body = chat_loop(2)
    body["messages"][1]["content"] = [
        {
            "type": "text",
            "text": "List the files.",
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    out = to_anthropic(body)
    assert markers(out) == ["messages[0].content[0]"]
    assert out["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


# A 1x1 PNG: an image block the Anthropic encoder builds outside its inline path.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def test_a_clients_own_breakpoint_on_an_image_is_kept_and_nothing_is_added() -> None:
    body = chat_loop(2)
    image = {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
        "cache_control": EPHEMERAL,
    }
    body["messages"][1]["content"] = [{"type": "text", "text": "Describe."}, image]
    out = to_anthropic(body)
    assert markers(out) == ["messages[0].content[1]"]
    assert out["messages"][0]["content"][1]["type"] == "image"
    # Without the client's marker, the same body gets the usual four.
    image.pop("cache_control")
    assert len(markers(to_anthropic(body))) == 4


def test_anthropic_clients_and_the_option_off_get_none() -> None:
    anthropic_body = {
        "model": "m",
        "max_tokens": 10,
        "system": "S",
        "messages": [{"role": "user", "content": "q"}],
    }
    out = to_anthropic(anthropic_body, "anthropic_messages")
    assert markers(out) == [] and out["system"] == "S"
    off = to_anthropic(chat_loop(3), options=UpstreamOptions(cache_breakpoints=False))
    assert markers(off) == [] and off["system"] == "You are an agent."
