"""spec/message-placement.txt, one test per rule.

Rules, in the order the spec states them (MP-n is referenced from each test):

High-level placement, system and developer instructions
  MP-1  Chat ``role: "system"`` content goes to the top-level Anthropic ``system`` field,
        never into Anthropic ``messages[]``.
  MP-2  Chat ``role: "developer"`` content is folded into the top-level ``system`` too
        (Anthropic has no developer role).
  MP-3  A single non-empty system text part uses the string form of ``system``.
  MP-4  Several system parts use the block form, one text block per part (boundaries kept).
User content
  MP-5  Chat user text / image / file parts become Anthropic user text / image / document
        blocks.
  MP-6  Unsupported user parts fail with an invalid-payload error (400) instead of being
        silently dropped.
Tool call request
  MP-7  An assistant message's content and ``tool_calls[]`` become ONE Anthropic assistant
        message: text block(s), then ``tool_use`` blocks with the same id and name.
  MP-8  Chat function ``arguments`` are parsed as JSON into ``tool_use.input``; invalid JSON
        fails the conversion and is never replaced with ``{}``.
  MP-9  Chat function tools become Anthropic custom tools (name, description, input_schema).
  MP-10 Chat custom tool definitions are rejected toward Anthropic.
  MP-11 Chat custom tool choices are rejected toward Anthropic.
  MP-12 Chat custom tool calls are rejected toward Anthropic.
Tool call result
  MP-13 A Chat ``role: "tool"`` message is an Anthropic ``role: "user"`` message holding a
        ``tool_result`` block that references the ``tool_use.id``; never Chat user content
        nor Anthropic assistant content (checked both ways). Deviation: an image in a
        tool result goes to Chat as a labelled user message after the tool message.
Mapping tool_result.is_error
  MP-14 ``is_error = true`` is never mapped to Responses ``incomplete``; the error context
        survives in the output text.
  MP-15 Anthropic -> Responses: the ``function_call_output`` status is always ``completed``.
  MP-16 Anthropic -> Chat: ``is_error`` is dropped; the tool message carries only
        ``tool_call_id`` and the error text, verbatim.
  MP-17 Responses / Chat -> Anthropic: ``is_error = true`` is never synthesised.
Legacy function messages
  MP-18 Chat ``role: "function"`` messages are rejected toward Anthropic (no invented id,
        no downgrade to user text).
Response choices and candidate replies
  MP-19 A Chat response translated to Anthropic or Responses must have exactly one choice;
        multi-choice (or choice-less) responses are rejected, never merged or truncated.
  MP-20 Parallel tool calls live in ONE candidate: Chat ``tool_calls[]`` <-> several
        ``tool_use`` blocks of a single Anthropic assistant message (both ways).
Chat -> Responses output placement
  MP-21 ``message.content`` becomes an ``output_text`` part of a message item, first.
  MP-22 ``message.refusal`` becomes a ``refusal`` part of the same message item.
  MP-23 ``tool_calls[]`` become sibling ``function_call`` / ``custom_tool_call`` items after
        the message item, never parts of ``OutputMessage.content[]``.
  MP-24 A tool-calls-only Chat response gives only tool-call items.
Chat -> Anthropic response and stream semantics (non-streaming)
  MP-25 ``message.content`` -> text blocks; function ``tool_calls[]`` -> ``tool_use`` blocks
        with the arguments parsed as JSON (unparseable arguments fail).
  MP-26 ``message.refusal`` -> a text block with the wording, ``stop_reason: "refusal"`` and
        ``stop_details.explanation``; no ``category``.
  MP-27 Responses with no representable text, refusal or function tool call are rejected.
Chat -> Anthropic streaming
  MP-28 ``message_start`` waits for the first assistant choice chunk.
  MP-29 ``delta.content`` / ``delta.refusal`` become an Anthropic text block (``text_delta``).
  MP-30 A function tool-call start becomes a ``tool_use`` start with ``input: {}``; argument
        fragments become ``input_json_delta`` events.
  MP-31 At ``finish_reason`` every open block is closed and the terminal state is held
        (no ``message_delta`` yet).
  MP-32 ``message_delta`` + ``message_stop`` come with the later usage-only chunk, or with
        ``[DONE]`` / EOF when no final usage comes.
  MP-33 The usage-only ``choices: []`` chunk is the source of the final usage.
  MP-34 Usage on a non-empty ``choices`` chunk is not final usage, does not stop the
        stream, and is ignored.
  MP-35 A usage-only chunk before any assistant message is rejected.
  MP-36 A usage-only chunk before a terminal finish_reason is rejected.
  MP-37 A usage-only chunk after the Anthropic message has stopped is rejected.
  MP-38 Chat stream logprobs are rejected.
  MP-39 Non-assistant delta roles are rejected.
  MP-40 Multi-choice chunks are rejected.
Streaming terminators
  MP-41 Emitted Chat streams end with ``data: [DONE]`` after the finish / usage chunks.
  MP-42 A consumed Chat stream ends at ``[DONE]`` after a terminal finish_reason.
  MP-43 Emitted Responses streams end with a typed terminal event and carry no ``[DONE]``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols import get_codec
from tests.spec._util import (
    ANTHROPIC,
    CHAT,
    RESPONSES,
    Pipe,
    a_block_stop,
    a_message_delta,
    a_message_start,
    a_message_stop,
    a_text,
    a_text_start,
    anthropic_message,
    anthropic_sse,
    chat_chunk,
    chat_chunks,
    chat_completion,
    chat_sse,
    chat_tool_args,
    chat_tool_start,
    chat_usage_chunk,
    client_request,
    event_types,
    r_text_part,
    rejected,
    responses_message_stream,
    sse_events,
    translate_json,
    translate_request,
    translate_stream,
    typed_events,
    validate_anthropic,
    validate_chat,
    validate_responses,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = "JVBERi0xLjQKJcfsj6IKNSAwIG9iago="


def chat_body(*messages: dict[str, Any], **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-client", "messages": list(messages)}
    body.update(kw)
    return body


def user(content: Any = "Look it up.") -> dict[str, Any]:
    return {"role": "user", "content": content}


def lookup_call(call_id: str = "call_1", arguments: str = '{"query":"proxai"}') -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "lookup", "arguments": arguments},
    }


def function_tool(name: str = "lookup") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Look something up.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }


def custom_tool() -> dict[str, Any]:
    return {
        "type": "custom",
        "custom": {
            "name": "apply_patch",
            "description": "Patch files.",
            "format": {"type": "text"},
        },
    }


def to_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    return translate_request(CHAT, ANTHROPIC, body)


# ====================================================== system and developer


def test_chat_system_message_hoists_into_anthropic_top_level_system() -> None:
    """MP-1: "Translate Chat system ... content into the top-level Anthropic system field";
    Anthropic "does not put system instructions in messages[]"."""
    out = to_anthropic(chat_body({"role": "system", "content": "You are concise."}, user()))
    assert out["system"] == "You are concise."
    assert out["messages"] == [{"role": "user", "content": "Look it up."}]


def test_chat_developer_message_folds_into_anthropic_top_level_system() -> None:
    """MP-2: "Developer instructions | role: developer | no dedicated role; fold into
    top-level system"."""
    out = to_anthropic(chat_body({"role": "developer", "content": "Prefer exact answers."}, user()))
    assert out["system"] == "Prefer exact answers."
    assert all(m["role"] in ("user", "assistant") for m in out["messages"])
    assert "Prefer exact answers." not in json.dumps(out["messages"])


@pytest.mark.parametrize(
    "instructions",
    [
        [{"role": "system", "content": "You are concise."}],
        [{"role": "developer", "content": [{"type": "text", "text": "You are concise."}]}],
        [{"role": "system", "content": ""}, {"role": "developer", "content": "You are concise."}],
    ],
    ids=["system-string", "developer-one-part", "one-non-empty-of-two"],
)
def test_chat_system_and_developer_messages_hoist_into_anthropic_system_string_for_one_part(
    instructions: list[dict[str, Any]],
) -> None:
    """MP-3: "If there is a single non-empty text part, use the string form." """
    out = to_anthropic(chat_body(*instructions, user()))
    assert out["system"] == "You are concise."


@pytest.mark.parametrize(
    "instructions",
    [
        [
            {"role": "system", "content": "You are concise."},
            {"role": "developer", "content": "Prefer exact answers."},
        ],
        [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "You are concise."},
                    {"type": "text", "text": "Prefer exact answers."},
                ],
            }
        ],
    ],
    ids=["system-and-developer", "two-parts-of-one-message"],
)
def test_chat_system_and_developer_messages_hoist_into_anthropic_system_blocks_for_several_parts(
    instructions: list[dict[str, Any]],
) -> None:
    """MP-4: "If there are multiple parts, use the block form to preserve boundaries"."""
    out = to_anthropic(chat_body(*instructions, user()))
    assert out["system"] == [
        {"type": "text", "text": "You are concise."},
        {"type": "text", "text": "Prefer exact answers."},
    ]


# ============================================================== user content


def test_chat_user_text_image_and_file_parts_become_anthropic_user_blocks() -> None:
    """MP-5: "Translate these into Anthropic user content text/image/document blocks where
    the target protocol can represent the source." """
    content = [
        {"type": "text", "text": "Summarize this."},
        {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
        },
    ]
    out = to_anthropic(chat_body(user(content)))
    assert out["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Summarize this."},
                {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                    "title": "a.pdf",
                },
            ],
        }
    ]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "image_url", "image_url": {"url": "data:image/tiff;base64,SUkqAA=="}},
        {
            "type": "file",
            "file": {"file_data": "data:application/zip;base64,UEsDBA==", "filename": "a.zip"},
        },
    ],
    ids=["audio", "tiff-image", "zip-file"],
)
def test_chat_unsupported_user_part_is_rejected_toward_anthropic_not_dropped(
    part: dict[str, Any],
) -> None:
    """MP-6: "Unsupported user parts should fail with a TranslationError::InvalidPayload
    rather than being silently dropped." """
    body = chat_body(user([{"type": "text", "text": "What is this?"}, part]))
    err = rejected(to_anthropic, body, status=400)
    assert err.kind == "invalid_request"


# ========================================================= tool call request


def test_chat_assistant_tool_calls_become_tool_use_blocks_of_one_anthropic_assistant_message() -> (
    None
):
    """MP-7: "In Anthropic Messages, the same request is an assistant content block":
    text first, then ``tool_use`` with the Chat call's id and name."""
    body = chat_body(
        user(),
        {"role": "assistant", "content": "I will look that up.", "tool_calls": [lookup_call()]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        tools=[function_tool()],
    )
    out = to_anthropic(body)
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I will look that up."},
            {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"query": "proxai"}},
        ],
    }


@pytest.mark.parametrize(
    "arguments",
    [
        '{"query":',
        "not json",
        pytest.param(
            "",
            marks=pytest.mark.xfail(
                strict=True,
                reason='deliberate: empty arguments "" become input {} because "" is how an '
                "argument-less call arrives (a streamed call with no argument fragments, some "
                'Chat servers), so it means "no arguments", not broken JSON '
                "(anthropic_messages/request.py _arguments_out)",
            ),
        ),
    ],
    ids=["truncated", "not-json", "empty-string"],
)
def test_chat_invalid_tool_call_arguments_fail_toward_anthropic_instead_of_becoming_empty_input(
    arguments: str,
) -> None:
    """MP-8: "parse that string as JSON and fail the conversion if it is invalid. Do not
    replace invalid arguments with {}." """
    body = chat_body(
        user(),
        {"role": "assistant", "content": None, "tool_calls": [lookup_call(arguments=arguments)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        tools=[function_tool()],
    )
    err = rejected(to_anthropic, body, status=400)
    assert "JSON" in err.message


def test_chat_function_tools_become_anthropic_custom_tools() -> None:
    """MP-9: "Chat function tools map to Anthropic custom tools because both carry a named
    JSON-schema input contract." """
    out = to_anthropic(chat_body(user(), tools=[function_tool()]))
    assert out["tools"] == [
        {
            "name": "lookup",
            "description": "Look something up.",
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
        }
    ]


def test_chat_custom_tool_definition_is_rejected_toward_anthropic() -> None:
    """MP-10: "Reject Chat custom tool definitions ... when translating to Anthropic
    Messages rather than pretending that they are empty-object JSON tools." """
    err = rejected(
        to_anthropic, chat_body(user(), tools=[function_tool(), custom_tool()]), status=400
    )
    assert err.param == "tools[1]"


def test_chat_custom_tool_choice_is_rejected_toward_anthropic() -> None:
    """MP-11: "Reject ... custom tool choices ... when translating to Anthropic Messages"."""
    body = chat_body(
        user(),
        tools=[function_tool()],
        tool_choice={"type": "custom", "custom": {"name": "apply_patch"}},
    )
    err = rejected(to_anthropic, body, status=400)
    assert err.param == "tool_choice"


def test_chat_custom_tool_call_is_rejected_toward_anthropic() -> None:
    """MP-12: "Reject ... custom tool calls when translating to Anthropic Messages"."""
    call = {"id": "call_c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** x"}}
    body = chat_body(
        user(),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_c", "content": "done"},
    )
    err = rejected(to_anthropic, body, status=400)
    assert "custom" in err.message


# ========================================================== tool call result


def test_chat_tool_message_becomes_anthropic_user_tool_result_and_back() -> None:
    """MP-13: "a Chat role: "tool" message translates to an Anthropic role: "user" message
    containing a tool_result block. Do not try to place Chat tool results inside Chat user
    content or Anthropic assistant content." Checked Chat -> Anthropic and back."""
    chat = chat_body(
        user(),
        {"role": "assistant", "content": None, "tool_calls": [lookup_call()]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        tools=[function_tool()],
    )
    anthropic = to_anthropic(chat)
    assert anthropic["messages"][1]["role"] == "assistant"
    assert [b["type"] for b in anthropic["messages"][1]["content"]] == ["tool_use"]
    assert anthropic["messages"][2]["role"] == "user"
    (result,) = anthropic["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "call_1"
    assert result["content"] == "found"

    anthropic_body = {"model": "claude-client", "max_tokens": 100, **anthropic}
    back = translate_request(ANTHROPIC, CHAT, anthropic_body)["messages"]
    assert back[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "found"}
    assert not any(m["role"] == "user" and "found" in json.dumps(m) for m in back)


PIXEL = "iVBORw0KGgo="
MP13_IMAGE_DEVIATION = (
    "deliberate: an Anthropic tool_result holding an image goes to a Chat upstream as the "
    "tool message (its text) followed by a user message holding the image, labelled with "
    "the call id, because Chat role: tool messages carry text only; dropping the image "
    "would silently change the answer (a model that cannot see the screenshot it asked for)"
)


def anthropic_image_result_toward_chat() -> list[dict[str, Any]]:
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [
            {"type": "text", "text": "screenshot:"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
            },
        ],
    }
    body = {
        "model": "claude-client",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Take a screenshot."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}],
            },
            {"role": "user", "content": [result]},
        ],
    }
    return list(translate_request(ANTHROPIC, CHAT, body)["messages"])


@pytest.mark.xfail(strict=True, reason=MP13_IMAGE_DEVIATION)
def test_mp13_an_image_tool_result_never_becomes_chat_user_content() -> None:
    """MP-13 read strictly: no part of a tool result is placed in Chat user content."""
    messages = anthropic_image_result_toward_chat()
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]


def test_mp13_deviation_an_image_tool_result_rides_in_a_labelled_user_message() -> None:
    """The documented deviation from MP-13 (docs/spec-index.md): the tool message keeps
    the text and the call id; the image follows in ONE user message, after the tool
    messages, labelled with the call it belongs to; nothing else moves."""
    messages = anthropic_image_result_toward_chat()
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "screenshot:"}
    label, image = messages[3]["content"]
    assert label == {"type": "text", "text": "[content returned by tool call toolu_1]"}
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/png;base64," + PIXEL


def anthropic_tool_loop(is_error: bool, result: str = "Error: lookup failed") -> dict[str, Any]:
    tool_result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": result,
        "is_error": is_error,
    }
    return {
        "model": "claude-client",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Look it up."},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}
                ],
            },
            {"role": "user", "content": [tool_result]},
        ],
    }


def function_call_output(body: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [i for i in body["input"] if i["type"] == "function_call_output"]
    (item,) = items
    return item


@pytest.mark.parametrize("is_error", [True, False])
def test_anthropic_tool_result_is_error_never_maps_to_responses_incomplete(is_error: bool) -> None:
    """MP-14: "Do not map is_error = true to Incomplete ... The error context survives in
    the output payload text." """
    out = translate_request(ANTHROPIC, RESPONSES, anthropic_tool_loop(is_error))
    item = function_call_output(out)
    assert item.get("status") != "incomplete"
    assert "incomplete" not in json.dumps(out["input"])
    assert item["output"] == "Error: lookup failed"
    assert item["call_id"] == "toolu_1"


@pytest.mark.parametrize("is_error", [True, False])
def test_anthropic_tool_result_becomes_responses_function_call_output_with_status_completed(
    is_error: bool,
) -> None:
    """MP-15: "Anthropic -> OpenAI Responses (FunctionCallOutputResource.status): always
    Completed." """
    out = translate_request(ANTHROPIC, RESPONSES, anthropic_tool_loop(is_error))
    assert function_call_output(out).get("status") == "completed"


def test_anthropic_tool_result_is_error_is_dropped_toward_chat_with_error_text_verbatim() -> None:
    """MP-16: "Chat role: "tool" messages have no status or error field at all ... The
    is_error flag is dropped on translation, and any error text in content is forwarded
    verbatim." """
    out = translate_request(ANTHROPIC, CHAT, anthropic_tool_loop(True))
    assert out["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "toolu_1",
        "content": "Error: lookup failed",
    }


def chat_failed_tool_loop() -> dict[str, Any]:
    return chat_body(
        user(),
        {"role": "assistant", "content": None, "tool_calls": [lookup_call()]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: lookup failed"},
        tools=[function_tool()],
    )


def responses_failed_tool_loop() -> dict[str, Any]:
    return {
        "model": "gpt-client",
        "input": [
            {"role": "user", "content": "Look it up."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "lookup",
                "arguments": '{"query":"proxai"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "Error: lookup failed"},
        ],
        "tools": [
            {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
        ],
    }


@pytest.mark.parametrize(
    ("client", "body"),
    [(CHAT, chat_failed_tool_loop()), (RESPONSES, responses_failed_tool_loop())],
    ids=["chat", "responses"],
)
def test_openai_tool_output_never_synthesizes_anthropic_is_error(
    client: ProtocolName, body: dict[str, Any]
) -> None:
    """MP-17: "proxai currently does not synthesize is_error = true from any heuristic on
    the inbound side"."""
    out = translate_request(client, ANTHROPIC, body)
    results = [
        b
        for m in out["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["call_1"]
    assert results[0]["content"] == "Error: lookup failed"
    assert results[0].get("is_error") in (None, False)


# ==================================================== legacy function messages


def test_chat_legacy_function_message_is_rejected_toward_anthropic() -> None:
    """MP-18: "Reject role: "function" messages when translating to Anthropic Messages ...
    Do not invent an id or downgrade the result into ordinary user text." """
    body = chat_body(
        user(),
        {"role": "assistant", "content": "Calling lookup."},
        {"role": "function", "name": "lookup", "content": "found"},
    )
    err = rejected(to_anthropic, body, status=400)
    assert err.param == "messages[2].role"


# ======================================================= response choices


def two_choices() -> dict[str, Any]:
    body = chat_completion({"role": "assistant", "content": "Option A"})
    body["choices"].append(
        {
            "index": 1,
            "message": {"role": "assistant", "content": "Option B"},
            "finish_reason": "stop",
            "logprobs": None,
        }
    )
    return body


def no_choice() -> dict[str, Any]:
    return chat_completion({"role": "assistant", "content": "x"}, choices=[])


@pytest.mark.parametrize("client", [ANTHROPIC, RESPONSES])
@pytest.mark.parametrize("body", [two_choices(), no_choice()], ids=["two-choices", "no-choice"])
def test_chat_response_must_have_exactly_one_choice_toward_anthropic_and_responses(
    client: ProtocolName, body: dict[str, Any]
) -> None:
    """MP-19: "When translating a Chat response to Anthropic Messages or OpenAI Responses,
    require exactly one choice and reject multi-choice responses." """
    err = rejected(translate_json, CHAT, client, body, status=502)
    assert "choice" in err.message


def test_parallel_tool_calls_of_one_choice_are_tool_use_blocks_of_one_anthropic_message() -> None:
    """MP-20: "Parallel tool calls live inside one candidate assistant message as
    choices[i].message.tool_calls[]; those can map to multiple Anthropic tool_use blocks in
    a single assistant message." Checked Chat -> Anthropic and Anthropic -> Chat."""
    calls = [
        lookup_call("call_a", '{"query":"a"}'),
        lookup_call("call_b", '{"query":"b"}'),
    ]
    msg = {"role": "assistant", "content": None, "tool_calls": calls}
    out = translate_json(CHAT, ANTHROPIC, chat_completion(msg, "tool_calls"))
    assert out["type"] == "message"
    assert out["content"] == [
        {"type": "tool_use", "id": "call_a", "name": "lookup", "input": {"query": "a"}},
        {"type": "tool_use", "id": "call_b", "name": "lookup", "input": {"query": "b"}},
    ]
    assert out["stop_reason"] == "tool_use"

    back = translate_json(ANTHROPIC, CHAT, anthropic_message(out["content"], "tool_use"))
    (choice,) = back["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "tool_calls"
    assert [
        (t["id"], json.loads(t["function"]["arguments"])) for t in choice["message"]["tool_calls"]
    ] == [
        ("call_a", {"query": "a"}),
        ("call_b", {"query": "b"}),
    ]


# =========================================== Chat -> Responses output placement


def to_responses(message: dict[str, Any], finish: str = "stop") -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = translate_json(
        CHAT, RESPONSES, chat_completion(message, finish)
    )["output"]
    return output


def test_chat_content_becomes_responses_output_text_of_the_first_message_item() -> None:
    """MP-21: "choices[0].message.content | OutputItem::Message ... OutputText | First, when
    non-empty." """
    output = to_responses(
        {"role": "assistant", "content": "Looking up.", "tool_calls": [lookup_call()]},
        "tool_calls",
    )
    assert output[0]["type"] == "message"
    assert output[0]["role"] == "assistant"
    assert output[0]["content"] == [
        {"type": "output_text", "text": "Looking up.", "annotations": [], "logprobs": []}
    ]
    assert [i["type"] for i in output[1:]] == ["function_call"]


def test_chat_refusal_becomes_a_refusal_part_of_the_same_responses_message_item() -> None:
    """MP-22: "choices[0].message.refusal | Same OutputMessage.content[], as
    OutputMessageContent::Refusal | Alongside message content" """
    output = to_responses(
        {"role": "assistant", "content": "I can help with safe alternatives.", "refusal": "No."}
    )
    assert len(output) == 1
    assert [(p["type"], p.get("text", p.get("refusal"))) for p in output[0]["content"]] == [
        ("output_text", "I can help with safe alternatives."),
        ("refusal", "No."),
    ]


def test_chat_streamed_refusal_is_a_refusal_part_of_the_same_responses_message_item() -> None:
    """MP-22, streamed: content and refusal deltas are one message item with two parts,
    as in the non-streamed translation (the refusal part follows the text part)."""
    raw = chat_sse(
        chat_chunk({"role": "assistant", "content": "I can help with safe alternatives."}),
        chat_chunk({"refusal": "No."}),
        chat_chunk({}, "stop"),
        chat_usage_chunk(),
        "[DONE]",
    )
    s = validate_responses(translate_stream(CHAT, RESPONSES, raw))
    assert s.response is not None
    (item,) = s.response["output"]
    assert [(p["type"], p.get("text", p.get("refusal"))) for p in item["content"]] == [
        ("output_text", "I can help with safe alternatives."),
        ("refusal", "No."),
    ]


def test_chat_tool_calls_become_sibling_responses_items_after_the_message_item() -> None:
    """MP-23: "tool_calls[] | Separate function_call / custom_tool_call output items | After
    the assistant message content item. Do not put tool calls inside
    OutputMessage.content[]" """
    custom = {"id": "call_c", "type": "custom", "custom": {"name": "apply_patch", "input": "*x"}}
    output = to_responses(
        {"role": "assistant", "content": "Working.", "tool_calls": [lookup_call(), custom]},
        "tool_calls",
    )
    assert [i["type"] for i in output] == ["message", "function_call", "custom_tool_call"]
    assert [p["type"] for p in output[0]["content"]] == ["output_text"]
    assert (output[1]["call_id"], output[1]["name"], output[1]["arguments"]) == (
        "call_1",
        "lookup",
        '{"query":"proxai"}',
    )
    assert (output[2]["call_id"], output[2]["name"], output[2]["input"]) == (
        "call_c",
        "apply_patch",
        "*x",
    )


def streamed_to_responses(*content_around_call: str) -> list[str]:
    """Item types of a Chat stream: content ``before``, a tool call, content ``after``."""
    before, after = content_around_call
    raw = chat_sse(
        chat_chunk({"role": "assistant", "content": before or None}),
        chat_tool_start(0, "call_1", "lookup"),
        chat_tool_args(0, "{}"),
        chat_chunk({"content": after}),
        chat_chunk({}, "tool_calls"),
        chat_usage_chunk(),
        "[DONE]",
    )
    s = validate_responses(translate_stream(CHAT, RESPONSES, raw))
    assert s.response is not None
    return [i["type"] for i in s.response["output"]]


def test_chat_content_streamed_after_a_tool_call_stays_in_the_message_item_before_it() -> None:
    """MP-23 streamed: content after a tool call continues the message item opened before
    it, so the order is the non-streamed one (issue 17)."""
    assert streamed_to_responses("Let me check.", " Done.") == ["message", "function_call"]


@pytest.mark.xfail(
    strict=True,
    reason="deliberate: content that a Chat stream starts only after its tool calls becomes "
    "a message item after them, because the function_call items were already announced "
    "(output_item.added) when the content came; putting the message first would mean "
    "holding every tool call until finish_reason, which delays tool calls for every client "
    "and hides a stall inside tool-call arguments (tool_stall_timeout)",
)
def test_mp23_content_that_starts_after_the_tool_calls_comes_before_them_streamed() -> None:
    """MP-23 read strictly for a stream whose only content follows its tool calls."""
    assert streamed_to_responses("", "Done.") == ["message", "function_call"]


def test_chat_tool_calls_only_response_gives_only_responses_tool_call_items() -> None:
    """MP-24: "If a Chat response has only tool calls, the translated Responses output
    contains only those tool-call items." """
    output = to_responses({"role": "assistant", "content": None, "tool_calls": [lookup_call()]})
    assert [(i["type"], i["call_id"]) for i in output] == [("function_call", "call_1")]


# =============================================== Chat -> Anthropic non-streaming


def test_chat_response_content_and_function_calls_become_anthropic_text_and_tool_use() -> None:
    """MP-25: "map choices[0].message.content to Anthropic text blocks; map function
    tool_calls[] to Anthropic tool_use blocks, parsing Chat function arguments as JSON for
    tool_use.input" (unparseable arguments fail the conversion)."""
    msg = {"role": "assistant", "content": "I will look that up.", "tool_calls": [lookup_call()]}
    out = translate_json(CHAT, ANTHROPIC, chat_completion(msg, "tool_calls"))
    assert out["content"] == [
        {"type": "text", "text": "I will look that up."},
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"query": "proxai"}},
    ]
    bad = {"role": "assistant", "content": None, "tool_calls": [lookup_call(arguments="{oops")]}
    rejected(translate_json, CHAT, ANTHROPIC, chat_completion(bad, "tool_calls"), status=502)


def test_chat_answer_cut_by_length_keeps_its_text_and_a_best_effort_tool_use() -> None:
    """MP-25 at the token limit (issue 17, defect 2): arguments that ``length`` cut are
    not "unparseable" arguments of a whole answer; the answer is the same ``max_tokens``
    stop the stream gives, its text kept, the cut call an empty best-effort tool_use."""
    cut = lookup_call(arguments='{"query": "prox')
    msg = {"role": "assistant", "content": "I will look that up.", "tool_calls": [cut]}
    out = translate_json(CHAT, ANTHROPIC, chat_completion(msg, "length"))
    assert out["stop_reason"] == "max_tokens"
    assert out["content"] == [
        {"type": "text", "text": "I will look that up."},
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {}},
    ]
    whole = lookup_call()  # whole arguments at the limit are still parsed
    msg = {"role": "assistant", "content": None, "tool_calls": [whole]}
    out = translate_json(CHAT, ANTHROPIC, chat_completion(msg, "length"))
    assert out["content"][0]["input"] == {"query": "proxai"}
    assert out["stop_reason"] == "max_tokens"


def test_chat_refusal_becomes_anthropic_text_block_with_refusal_stop_and_explanation() -> None:
    """MP-26: "when message.refusal is present, keep the visible refusal wording as a text
    block and also set stop_reason: "refusal" with stop_details.explanation; Chat has no
    refusal category, so leave it absent" """
    msg = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    out = translate_json(CHAT, ANTHROPIC, chat_completion(msg))
    assert out["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert out["stop_reason"] == "refusal"
    assert out["stop_details"]["explanation"] == "I can't help with that."
    assert out["stop_details"].get("category") is None


@pytest.mark.parametrize("client", [ANTHROPIC, RESPONSES])
@pytest.mark.parametrize("content", [None, ""], ids=["null", "empty"])
def test_chat_response_without_text_refusal_or_function_calls_is_rejected_toward_anthropic(
    content: str | None, client: ProtocolName
) -> None:
    """MP-27: "reject responses without representable text, refusal, or function tool
    calls." """
    body = chat_completion({"role": "assistant", "content": content})
    err = rejected(translate_json, CHAT, client, body, status=502)
    assert "no representable answer" in str(err)


@pytest.mark.parametrize("client", [ANTHROPIC, RESPONSES])
def test_chat_stream_without_text_refusal_or_function_calls_is_rejected(
    client: ProtocolName,
) -> None:
    """MP-27, streamed: the same check at ``finish_reason`` when nothing representable
    was streamed (reasoning alone is not an answer)."""
    raw = chat_sse(
        chat_chunk({"role": "assistant", "content": ""}),
        chat_chunk({"reasoning_content": "Hmm."}),
        chat_chunk({}, "stop"),
        chat_usage_chunk(),
        "[DONE]",
    )
    err = rejected(translate_stream, CHAT, client, raw, status=502)
    assert "no representable answer" in str(err)


@pytest.mark.parametrize(
    ("finish", "stop"), [("length", "max_tokens"), ("content_filter", "refusal")]
)
@pytest.mark.parametrize("mode", ["json", "stream"])
def test_chat_empty_answer_cut_by_length_or_a_filter_is_a_stop_not_rejected(
    mode: str, finish: str, stop: str
) -> None:
    """MP-27's exceptions: an empty answer with ``finish_reason: "length"`` is a
    representable max_tokens stop (the model ran out of tokens before any text), and
    one with ``content_filter`` (Azure: content null) a representable filtered stop."""
    if mode == "json":
        body = chat_completion({"role": "assistant", "content": None}, finish)
        out = translate_json(CHAT, ANTHROPIC, body)
        assert (out["content"], out["stop_reason"]) == ([], stop)
    else:
        raw = chat_sse(
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({}, finish),
            chat_usage_chunk(),
            "[DONE]",
        )
        s = validate_anthropic(translate_stream(CHAT, ANTHROPIC, raw))
        assert (s.blocks, s.stop_reason) == ([], stop)


# ================================================== Chat -> Anthropic streaming


@pytest.mark.parametrize(
    "preamble",
    [
        [chat_chunk(choices=[], prompt_filter_results=[])],  # Azure's prompt filter
        [{"id": "", "object": "", "created": 0, "model": "", "choices": [], "x": 1}],
        [": keep-alive"],  # an SSE comment
        [chat_chunk(choices=[], prompt_filter_results=[]), ": keep-alive"],
    ],
    ids=["azure-prompt-filter", "azure-annotation", "comment", "both"],
)
def test_chat_message_start_waits_for_the_first_assistant_choice_chunk(
    preamble: list[dict[str, Any] | str],
) -> None:
    """MP-28: "wait for the first assistant choice chunk before emitting Anthropic
    message_start" — whatever comes first (Azure's preambles, comments), and the message
    is that chunk's, not the preamble's."""
    pipe = Pipe(CHAT, ANTHROPIC)
    frames = b"".join(f"{p}\n\n".encode() if isinstance(p, str) else chat_sse(p) for p in preamble)
    assert pipe.feed(frames) == b""
    first = pipe.feed(
        chat_sse(chat_chunk({"role": "assistant", "content": ""}, id="chatcmpl-first"))
    )
    assert event_types(first) == ["message_start"]
    (start,) = typed_events(first)
    assert "first" in start["message"]["id"]


@pytest.mark.parametrize("field", ["content", "refusal"])
def test_chat_content_and_refusal_deltas_become_one_anthropic_text_block(field: str) -> None:
    """MP-29: "translate Chat delta.content/delta.refusal into an Anthropic text block; the
    first text fragment may be carried by content_block_start, while later fragments use
    text_delta" """
    raw = chat_sse(
        chat_chunk({"role": "assistant", field: "I can't"}),
        chat_chunk({field: " do that."}),
        chat_chunk({}, "stop"),
        chat_usage_chunk(),
        "[DONE]",
    )
    out = translate_stream(CHAT, ANTHROPIC, raw)
    s = validate_anthropic(out)
    assert [b.type for b in s.blocks] == ["text"]
    assert s.blocks[0].start["text"] + s.blocks[0].text == "I can't do that."
    deltas = [e["delta"] for e in typed_events(out) if e["type"] == "content_block_delta"]
    assert deltas == [
        {"type": "text_delta", "text": "I can't"},
        {"type": "text_delta", "text": " do that."},
    ]
    assert s.stop_reason == ("refusal" if field == "refusal" else "end_turn")


def test_chat_tool_call_start_becomes_tool_use_with_empty_input_and_input_json_deltas() -> None:
    """MP-30: "translate Chat function tool-call starts to tool_use block starts with an
    empty object input ... send those argument fragments as input_json_delta events" """
    raw = chat_sse(
        chat_chunk({"role": "assistant", "content": None}),
        chat_tool_start(0, "call_1", "lookup"),
        chat_tool_args(0, '{"query":'),
        chat_tool_args(0, '"proxai"}'),
        chat_chunk({}, "tool_calls"),
        chat_usage_chunk(),
        "[DONE]",
    )
    out = translate_stream(CHAT, ANTHROPIC, raw)
    s = validate_anthropic(out)
    events = typed_events(out)
    (start,) = [e for e in events if e["type"] == "content_block_start"]
    assert start["content_block"] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "lookup",
        "input": {},
    }
    assert [e["delta"] for e in events if e["type"] == "content_block_delta"] == [
        {"type": "input_json_delta", "partial_json": '{"query":'},
        {"type": "input_json_delta", "partial_json": '"proxai"}'},
    ]
    assert s.stop_reason == "tool_use"


def test_chat_finish_reason_closes_open_anthropic_blocks_and_holds_the_terminal_state() -> None:
    """MP-31: "when Chat finish_reason arrives, close all open content blocks and retain a
    pending terminal state containing the finish reason and refusal wording" """
    pipe = Pipe(CHAT, ANTHROPIC)
    head = pipe.feed(
        chat_sse(
            chat_chunk({"role": "assistant", "content": "Let me check."}),
            chat_tool_start(0, "call_1", "lookup"),
            chat_tool_args(0, '{"query":"x"}'),
        )
    )
    at_finish = pipe.feed(chat_sse(chat_chunk({}, "tool_calls")))
    # The text stays open beside the call (MP-23), so the call follows it at the finish.
    assert event_types(at_finish)[0] == "content_block_stop"
    assert "message_delta" not in event_types(at_finish)
    started = [
        e["index"] for e in typed_events(head + at_finish) if e["type"] == "content_block_start"
    ]
    stopped = [
        e["index"] for e in typed_events(head + at_finish) if e["type"] == "content_block_stop"
    ]
    assert started == stopped == [0, 1]
    rest = pipe.feed(chat_sse(chat_usage_chunk(), "[DONE]")) + pipe.close()
    assert event_types(rest) == ["message_delta", "message_stop"]
    s = validate_anthropic(head + at_finish + rest)
    assert s.stop_reason == "tool_use"


@pytest.mark.parametrize("terminator", ["usage-chunk", "done", "eof"])
def test_chat_to_anthropic_message_delta_and_stop_come_with_usage_chunk_done_or_eof(
    terminator: str,
) -> None:
    """MP-32: "emit Anthropic message_delta/message_stop when a later choices: [] usage-only
    chunk arrives, or when [DONE] / EOF ends the stream without final usage." """
    pipe = Pipe(CHAT, ANTHROPIC)
    body = pipe.feed(
        chat_sse(chat_chunk({"role": "assistant", "content": "Hi"}), chat_chunk({}, "stop"))
    )
    if terminator == "usage-chunk":
        at_end = pipe.feed(chat_sse(chat_usage_chunk()))
        tail = pipe.feed(chat_sse("[DONE]")) + pipe.close()
    elif terminator == "done":
        at_end = pipe.feed(chat_sse("[DONE]"))
        tail = pipe.close()
    else:
        at_end = pipe.close()
        tail = b""
    assert event_types(at_end) == ["message_delta", "message_stop"]
    assert tail == b""
    s = validate_anthropic(body + at_end)
    assert s.stop_reason == "end_turn"
    assert s.blocks[0].text == "Hi"


def test_chat_usage_only_chunk_is_the_source_of_final_anthropic_usage() -> None:
    """MP-33: "Treat that usage-only chunk as the source of final usage." """
    raw = chat_sse(
        chat_chunk({"role": "assistant", "content": "Hi"}),
        chat_chunk({}, "stop"),
        chat_usage_chunk(prompt=123, completion=45),
        "[DONE]",
    )
    s = validate_anthropic(translate_stream(CHAT, ANTHROPIC, raw))
    assert s.usage is not None
    assert (s.usage["input_tokens"], s.usage["output_tokens"]) == (123, 45)


INTERMEDIATE = {"prompt_tokens": 900, "completion_tokens": 800, "total_tokens": 1700}


@pytest.mark.parametrize(
    "case",
    [
        "content-chunk-then-usage-chunk",
        "finish-chunk-then-usage-chunk",
        pytest.param(
            "finish-chunk-then-done",
            marks=pytest.mark.xfail(
                strict=True,
                reason="deliberate: usage carried on the finish_reason chunk becomes the final "
                "usage only when no usage-only chunk follows, because DeepSeek-style servers "
                "send usage nowhere else and their real figures beat reporting zero "
                "(openai_chat/stream.py ChatStreamDecoder.feed keeps it as _fallback_usage)",
            ),
        ),
    ],
)
def test_chat_usage_on_a_choices_chunk_is_not_final_usage_and_does_not_stop_the_stream(
    case: str,
) -> None:
    """MP-34: "Do not treat usage on a non-empty choices chunk as final usage and do not use
    it to stop the Anthropic stream ... those values ... are ignored by this conversion." """
    pipe = Pipe(CHAT, ANTHROPIC)
    content_usage = INTERMEDIATE if case.startswith("content") else None
    finish_usage = INTERMEDIATE if case.startswith("finish") else None
    out = pipe.feed(chat_sse(chat_chunk({"role": "assistant", "content": "Hi"})))
    step = pipe.feed(chat_sse(chat_chunk({"content": "!"}, usage=content_usage)))
    assert "message_delta" not in event_types(step)
    out += step
    step = pipe.feed(chat_sse(chat_chunk({}, "stop", usage=finish_usage)))
    assert "message_delta" not in event_types(step)
    out += step
    final_chunk = case.endswith("usage-chunk")
    if final_chunk:
        out += pipe.feed(chat_sse(chat_usage_chunk(prompt=11, completion=7), "[DONE]"))
    else:
        out += pipe.feed(chat_sse("[DONE]"))
    out += pipe.close()
    s = validate_anthropic(out)
    assert s.usage is not None
    if final_chunk:
        assert (s.usage["input_tokens"], s.usage["output_tokens"]) == (11, 7)
    else:  # no final usage at all: nothing is counted, the intermediate figures are ignored
        assert s.usage["output_tokens"] == 0
        assert s.usage.get("input_tokens") != 900


def test_chat_usage_only_chunk_before_any_assistant_message_is_rejected() -> None:
    """MP-35: "Reject usage-only chunks before any assistant message" """
    pipe = Pipe(CHAT, ANTHROPIC)
    rejected(pipe.feed, chat_sse(chat_usage_chunk()), status=502)


def test_chat_usage_only_chunk_before_finish_reason_is_rejected() -> None:
    """MP-36: "A choices: [] Chat stream chunk is only valid as a usage-only chunk after a
    terminal finish_reason has been seen. Reject usage-only chunks ... before a terminal
    finish reason" """
    pipe = Pipe(CHAT, ANTHROPIC)
    pipe.feed(chat_sse(chat_chunk({"role": "assistant", "content": "Hi"})))
    rejected(pipe.feed, chat_sse(chat_usage_chunk()), status=502)


@pytest.mark.parametrize("stopped_by", ["usage-chunk", "done"])
def test_chat_usage_only_chunk_after_the_anthropic_message_stopped_is_rejected(
    stopped_by: str,
) -> None:
    """MP-37: "Reject usage-only chunks ... after the Anthropic message has stopped."

    The Chat decoder refuses them; the pipeline stops reading at the stop, so nothing
    after it reaches the client either."""
    opening = chat_sse(chat_chunk({"role": "assistant", "content": "Hi"}), chat_chunk({}, "stop"))
    ending = chat_sse(chat_usage_chunk() if stopped_by == "usage-chunk" else "[DONE]")
    pipe = Pipe(CHAT, ANTHROPIC)
    pipe.feed(opening)
    stop = pipe.feed(ending)
    assert event_types(stop)[-1] == "message_stop"
    assert pipe.feed(chat_sse(chat_usage_chunk())) == b""
    assert pipe.close() == b""
    decoder = get_codec(CHAT).stream_decoder()
    for e in sse_events(opening + ending):
        decoder.feed(e)
    late = sse_events(chat_sse(chat_usage_chunk()))[0]
    rejected(decoder.feed, late, status=502)


def test_chat_stream_logprobs_are_rejected_toward_anthropic() -> None:
    """MP-38: "Reject Chat stream logprobs ... rather than silently dropping information
    Anthropic Messages cannot represent." """
    lp = {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]}
    chunk = chat_chunk(
        choices=[
            {
                "index": 0,
                "delta": {"role": "assistant", "content": "Hi"},
                "logprobs": lp,
                "finish_reason": None,
            }
        ]
    )
    pipe = Pipe(CHAT, ANTHROPIC)
    err = rejected(pipe.feed, chat_sse(chunk), status=502)
    assert "logprobs" in err.message


GEMINI_LOGPROBS = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "generationConfig": {"responseLogprobs": True, "logprobs": 2},
}


@pytest.mark.parametrize(
    ("client", "body", "field"),
    [
        (RESPONSES, {"model": "m", "input": "hi", "top_logprobs": 2}, "top_logprobs"),
        ("gemini_generate_content", GEMINI_LOGPROBS, "logprobs"),
    ],
    ids=["responses", "gemini"],
)
def test_the_proxy_never_asks_a_chat_upstream_for_logprobs_it_rejects(
    client: ProtocolName, body: dict[str, Any], field: str
) -> None:
    """MP-38's other side (issue 17, defect 3): since the stream decoder rejects logprobs,
    a request for them is a 400 up front, and in lossy mode they are not sent at all."""
    err = rejected(translate_request, client, CHAT, body, status=400)
    assert err.param == field
    sent = translate_request(client, CHAT, body, True)
    assert "logprobs" not in sent and "top_logprobs" not in sent


@pytest.mark.parametrize("role", ["user", "tool", "system"])
def test_chat_stream_non_assistant_delta_role_is_rejected_toward_anthropic(role: str) -> None:
    """MP-39: "Reject ... non-assistant delta roles" """
    pipe = Pipe(CHAT, ANTHROPIC)
    pipe.feed(chat_sse(chat_chunk({"role": "assistant", "content": "Hi"})))
    err = rejected(pipe.feed, chat_sse(chat_chunk({"role": role, "content": "x"})), status=502)
    assert role in err.message


def test_chat_stream_multi_choice_chunk_is_rejected_toward_anthropic() -> None:
    """MP-40: "Reject ... multi-choice chunks" """
    chunk = chat_chunk(
        choices=[
            {"index": 0, "delta": {"role": "assistant", "content": "A"}, "finish_reason": None},
            {"index": 1, "delta": {"role": "assistant", "content": "B"}, "finish_reason": None},
        ]
    )
    pipe = Pipe(CHAT, ANTHROPIC)
    err = rejected(pipe.feed, chat_sse(chunk), status=502)
    assert "choices" in err.message


# ===================================================== streaming terminators


def anthropic_upstream(stop_reason: str = "end_turn") -> bytes:
    return anthropic_sse(
        a_message_start(),
        a_text_start(0),
        a_text(0, "Hello"),
        a_block_stop(0),
        a_message_delta(stop_reason),
        a_message_stop(),
    )


@pytest.mark.parametrize("include_usage", [True, False], ids=["usage", "no-usage"])
@pytest.mark.parametrize("upstream", [ANTHROPIC, RESPONSES])
def test_emitted_chat_stream_ends_with_done_after_the_finish_and_usage_chunks(
    upstream: ProtocolName, include_usage: bool
) -> None:
    """MP-41: "translators that emit Chat Completions streams must append [DONE] after the
    terminal finish/usage chunks" """
    raw = (
        anthropic_upstream()
        if upstream == ANTHROPIC
        else responses_message_stream([r_text_part("Hello")])
    )
    out = translate_stream(upstream, CHAT, raw, client_request(include_usage=include_usage))
    validate_chat(out, include_usage=include_usage)
    chunks = chat_chunks(out)
    assert chunks[-1] == "[DONE]"
    assert chunks.count("[DONE]") == 1
    before = chunks[-2]
    assert isinstance(before, dict)
    if include_usage:
        assert before["choices"] == [] and before["usage"]["total_tokens"] == 18
        finish = chunks[-3]
    else:
        finish = before
    assert isinstance(finish, dict)
    assert finish["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("client", "terminal"),
    [(ANTHROPIC, "message_stop"), (RESPONSES, "response.completed")],
)
def test_consumed_chat_stream_ends_at_done_after_a_terminal_finish_reason(
    client: ProtocolName, terminal: str
) -> None:
    """MP-42: "translators that consume Chat Completions streams should treat [DONE] as the
    stream-end marker after a terminal finish_reason." """
    pipe = Pipe(CHAT, client)
    out = pipe.feed(
        chat_sse(chat_chunk({"role": "assistant", "content": "Hi"}), chat_chunk({}, "stop"))
    )
    assert terminal not in event_types(out)
    at_done = pipe.feed(chat_sse("[DONE]"))
    assert event_types(at_done)[-1] == terminal
    assert pipe.close() == b""
    out += at_done
    if client == ANTHROPIC:
        assert validate_anthropic(out).stop_reason == "end_turn"
    else:
        assert validate_responses(out).status == "completed"

    early = Pipe(CHAT, client)
    cut = early.feed(chat_sse(chat_chunk({"role": "assistant", "content": "Hi"}), "[DONE]"))
    assert terminal not in event_types(cut)  # [DONE] before finish_reason is no success
    assert event_types(cut)[-1] in ("error", "response.failed")


def chat_upstream(status: str) -> bytes:
    if status == "failed":
        first: dict[str, Any] = {"role": "assistant", "refusal": "I can't."}
    else:
        first = {"role": "assistant", "content": "Hello"}
    finish = {"completed": "stop", "incomplete": "length", "failed": "stop"}[status]
    return chat_sse(chat_chunk(first), chat_chunk({}, finish), chat_usage_chunk(), "[DONE]")


@pytest.mark.parametrize("status", ["completed", "incomplete", "failed"])
@pytest.mark.parametrize("upstream", [ANTHROPIC, CHAT])
def test_emitted_responses_stream_ends_with_its_typed_terminal_event_and_no_done(
    upstream: ProtocolName, status: str
) -> None:
    """MP-43: "translators that emit Responses streams should end with the appropriate typed
    terminal event and should not add a Chat-style [DONE] sentinel" (a refusal ends
    ``failed``, per the status table)."""
    stop = {"completed": "end_turn", "incomplete": "max_tokens", "failed": "refusal"}[status]
    raw = anthropic_upstream(stop) if upstream == ANTHROPIC else chat_upstream(status)
    out = translate_stream(upstream, RESPONSES, raw)
    assert b"[DONE]" not in out
    s = validate_responses(out)
    assert event_types(out)[-1] == f"response.{status}"
    assert s.status == status
