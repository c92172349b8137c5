"""The Gemini ``streamGenerateContent?alt=sse`` grammar, both directions.

Grammar: a sequence of ``data: <GenerateContentResponse>`` frames and nothing else:
no start event, no block events, no terminator. Each frame holds the next parts of
candidate 0 (several per frame, text split anywhere, a function call always whole, in
one frame); ``finishReason`` and the final ``usageMetadata`` ride on the last frame. A
blocked prompt is one frame with ``promptFeedback.blockReason`` and no candidates; a
failure mid-way is a frame ``{"error": {...}}``.

``GeminiStreamDecoder`` turns parts into canonical blocks with the same rules as
``response.parts_in`` (adjacent texts continue one block, a signature closes its
thought, a signature on a non-thought part is a bare reasoning block before it), so a
folded stream equals the non-streamed answer. The terminal ``Finish`` is held until
the body ends, since usage may still change; a body that ends without a
``finishReason`` is a 502.

``GeminiStreamEncoder`` writes one frame per text or thought delta and one per whole
function call (arguments gathered until the call's block stops); the last frame
carries ``finishReason``, ``usageMetadata`` and any signature still waiting for a part.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ... import canonical as c
from ... import reasoning_carry
from ...errors import ProxyError
from ...lazy_decoder import LazyDecoder
from ...sse import encode_event
from .._kit import hosted_code
from .._kit import search_results as sr
from .._kit.delta_runs import Held, decoded, encode_deltas_with
from . import code_run, grounding, signatures, wire
from .errors import error_response, stream_error
from .grounding import grounding_out
from .response import (
    args_out,
    arguments_json,
    block_explanation,
    call_id,
    candidate,
    filter_explanation,
    finish_out,
    stop_in,
    usage_in,
    usage_out,
)

if TYPE_CHECKING:
    from ...sse import SSEEvent

_chunk_decoder: LazyDecoder[wire.GenerateContentResponse] = LazyDecoder(
    wire.GenerateContentResponse
)
_encoder = msgspec.json.Encoder()

_TEXT, _THOUGHT = "text", "reasoning"
# A one-text-part frame, as msgspec writes ``GenerateContentResponse`` (field order).
_DELTA_HEAD = b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":'
_TEXT_TAIL = b'}]},"index":0}]'
_THOUGHT_TAIL = b',"thought":true}]},"index":0}]'


# ==================================================================== decoder


def _plain_text(r: wire.GenerateContentResponse) -> bool:
    """A frame whose only effect on the open text block is its one text part (and
    perhaps usage): what ``GeminiStreamDecoder.delta_run`` takes."""
    cands = r.candidates
    if not cands or r.prompt_feedback is not None:
        return False
    cand = cands[0]
    content = cand.content
    if cand.finish_reason is not None or content is None or len(content.parts) != 1:
        return False
    p = content.parts[0]
    if cand.grounding_metadata is not None:
        return False
    return not (p.thought or p.thought_signature or p.function_call is not None)


class GeminiStreamDecoder:
    __slots__ = (
        "_block_reason",
        "_calls",
        "_done",
        "_finish",
        "_finish_message",
        "_grounding",
        "_held",
        "_id",
        "_next",
        "_open",
        "_open_kind",
        "_run",
        "_sealed",
        "_started",
        "_texts",
        "_usage",
    )

    def __init__(self) -> None:
        self._started = False
        self._done = False
        self._next = 0  # the next canonical block index
        self._open: int | None = None  # the text or thought block still growing
        self._open_kind = ""
        self._sealed = False  # the open thought got its signature: the next starts anew
        self._calls = 0
        self._id = ""
        self._finish: str | None = None
        self._finish_message: str | None = None
        self._block_reason: wire.PromptFeedback | None = None
        self._usage: wire.UsageMetadata | None = None
        self._held = Held()
        # Grounding comes on the last chunks and cites byte offsets into the whole
        # answer: each text block's text is kept to turn them into spans.
        self._grounding: dict[str, Any] | None = None
        self._texts: dict[int, list[str]] = {}
        # A code run told (``executableCode``) whose result has not come yet.
        self._run: c.ServerToolUse | None = None

    def feed(self, event: SSEEvent) -> list[c.StreamEvent]:
        if self._done:
            return []
        data = event.data
        if not data or data.isspace() or data == b"[DONE]":
            return []
        held = self._held  # the frame that ended a delta run comes decoded
        try:
            r = held.value if event is held.event else _chunk_decoder.decode(data)
        except (msgspec.DecodeError, ValueError) as e:
            self._done = True
            raise ProxyError.bad_gateway(f"malformed upstream stream frame: {e}") from None
        if r.candidates is None and r.prompt_feedback is None and r.usage_metadata is None:
            err = stream_error(data)
            if err is not None:
                self._done = True
                return [err]
        out: list[c.StreamEvent] = []
        if not self._started:
            self._started = True
            self._id = r.response_id or ""
            prompt = usage_in(r.usage_metadata) if r.usage_metadata is not None else None
            if prompt is not None:
                prompt.output_tokens = prompt.reasoning_tokens = 0
            out.append(c.MessageStart(id=self._id, model=r.model_version or "", usage=prompt))
        if r.usage_metadata is not None:
            self._usage = r.usage_metadata
        if r.prompt_feedback is not None and r.prompt_feedback.block_reason:
            self._block_reason = r.prompt_feedback
        if r.candidates:
            cand = r.candidates[0]
            if cand.grounding_metadata:
                self._grounding = cand.grounding_metadata
            if cand.content is not None:
                for p in cand.content.parts:
                    self._part(p, out)
            if cand.finish_reason is not None:
                self._finish = cand.finish_reason
                self._finish_message = cand.finish_message
        return out

    def delta_run(self, events: list[SSEEvent], start: int) -> tuple[int, int, list[str]]:
        """``feed`` for a run of frames that each hold one plain text part of the open
        text block, and nothing else but usage (see ``StreamDecoder.delta_run``)."""
        i = start
        index = self._open
        if self._done or not self._started or index is None or self._open_kind != _TEXT:
            return i, -1, []
        texts: list[str] = []
        usage: wire.UsageMetadata | None = None
        for e, r in decoded(_chunk_decoder.decode, events, start):
            if _plain_text(r):
                text = r.candidates[0].content.parts[0].text  # type: ignore[index, union-attr]
                if text:
                    texts.append(text)
                if r.usage_metadata is not None:
                    usage = r.usage_metadata
                i += 1
                continue
            self._held.put(e, r)
            break
        if usage is not None:
            self._usage = usage
        self._texts[index].extend(texts)
        return i, index, texts

    def close(self) -> list[c.StreamEvent]:
        if self._done:
            return []
        self._done = True
        out: list[c.StreamEvent] = []
        searches = self._grounded(out)
        self._close_open(out)
        if self._run is not None:  # (a run whose result never came)
            out.append(c.ServerTool(index=self._new(), use=self._run))
            self._run = None
        out.extend(searches)
        usage = usage_in(self._usage)
        usage.server_tool_requests = grounding.search_count(self._grounding)
        if self._finish is None:
            if self._block_reason is not None:
                out.append(
                    c.Finish(
                        stop_reason="refusal",
                        usage=usage,
                        refusal_explanation=block_explanation(self._block_reason),
                    )
                )
                return out
            return [
                c.StreamError(
                    status=502,
                    kind="bad_gateway",
                    message="upstream stream ended before its finishReason",
                )
            ]
        try:
            stop = stop_in(self._finish, self._calls > 0)
        except ProxyError as err:
            return [c.StreamError(status=err.status, kind=err.kind, message=err.message)]
        explanation = None
        if stop in ("content_filter", "refusal"):
            explanation = filter_explanation(self._finish, self._finish_message)
        out.append(c.Finish(stop_reason=stop, usage=usage, refusal_explanation=explanation))
        return out

    # ---- parts

    def _grounded(self, out: list[c.StreamEvent]) -> list[c.StreamEvent]:
        """The grounding's citations for each text block (a block closed before the
        answer ended gets them after its stop: encoders ignore them there), and its
        searches, to follow the last block (``anthropic_messages.search_stream`` puts
        them before the text that cites them for its clients)."""
        meta = self._grounding
        if not meta:
            return []
        blocks = list(self._texts)
        texts = ["".join(self._texts[i]) for i in blocks]
        for i, cites in zip(blocks, grounding.citations_in(meta, texts), strict=True):
            if cites:
                out.append(c.Citations(index=i, citations=cites))
        return [
            c.ServerTool(index=self._new(), use=u) for u in grounding.searches_in(meta, self._id)
        ]

    def _code(self, p: wire.Part, out: list[c.StreamEvent]) -> None:
        """A code run is one ``ServerTool`` once its result comes (between blocks); a
        run whose result never comes is told at its next part, without one."""
        self._close_open(out)
        if self._run is not None and p.executable_code is not None:
            out.append(c.ServerTool(index=self._new(), use=self._run))
            self._run = None
        if p.executable_code is not None:
            self._run = code_run.use_in(p.executable_code)
        elif self._run is not None and p.code_execution_result is not None:
            code_run.result_in(self._run, p.code_execution_result)
            out.append(c.ServerTool(index=self._new(), use=self._run))
            self._run = None

    def _new(self) -> int:
        i = self._next
        self._next += 1
        return i

    def _close_open(self, out: list[c.StreamEvent]) -> None:
        if self._open is not None:
            out.append(c.BlockStop(index=self._open))
            self._open = None

    @staticmethod
    def _tokens(index: int, r: c.Reasoning) -> c.BlockSignature:
        return c.BlockSignature(
            index=index,
            signature=r.signature,
            encrypted_content=r.encrypted_content,
            item_id=r.item_id,
            thought_signature=r.thought_signature,
        )

    def _part(self, p: wire.Part, out: list[c.StreamEvent]) -> None:
        sig = p.thought_signature
        if p.thought and p.text is not None:
            if self._open is None or self._open_kind != _THOUGHT or self._sealed:
                self._close_open(out)
                self._open, self._open_kind, self._sealed = self._new(), _THOUGHT, False
                out.append(c.BlockStart(index=self._open, kind="reasoning", summary=True))
            if p.text:
                out.append(c.BlockDelta(index=self._open, text=p.text))
            if sig:
                out.append(self._tokens(self._open, signatures.reasoning_in("", sig)))
                self._sealed = True
            return
        # A signature on a non-thought part: another provider's token for the open
        # thought, or a reasoning block of its own before the part.
        bare = signatures.reasoning_in("", sig) if sig else None
        if (
            bare is not None
            and bare.thought_signature is None
            and bare.redacted is None
            and self._open is not None
            and self._open_kind == _THOUGHT
            and not self._sealed
        ):
            out.append(self._tokens(self._open, bare))
            self._sealed = True
            bare = None
        if bare is not None:
            self._close_open(out)
            i = self._new()
            if bare.redacted is not None:
                out.append(c.BlockStart(index=i, kind="redacted_reasoning", redacted=bare.redacted))
            else:
                out.append(c.BlockStart(index=i, kind="reasoning", summary=bare.summary))
                if bare.text:  # the text a packed token rode with
                    out.append(c.BlockDelta(index=i, text=bare.text))
                out.append(self._tokens(i, bare))
            out.append(c.BlockStop(index=i))
        if p.executable_code is not None or p.code_execution_result is not None:
            self._code(p, out)
        elif p.function_call is not None:
            self._close_open(out)
            fc = p.function_call
            i = self._new()
            out.append(
                c.BlockStart(
                    index=i,
                    kind="tool_call",
                    call_id=call_id(fc, self._id, self._calls),
                    name=fc.name,
                )
            )
            out.append(c.BlockDelta(index=i, text=arguments_json(fc.args)))
            out.append(c.BlockStop(index=i))
            self._calls += 1
        elif p.text:
            if self._open is None or self._open_kind != _TEXT:
                self._close_open(out)
                self._open, self._open_kind = self._new(), _TEXT
                self._texts[self._open] = []
                out.append(c.BlockStart(index=self._open, kind="text"))
            self._texts[self._open].append(p.text)
            out.append(c.BlockDelta(index=self._open, text=p.text))


# ==================================================================== encoder


class _Block:
    __slots__ = ("args", "call_id", "has_text", "kind", "name", "reasoning")

    def __init__(self, ev: c.BlockStart) -> None:
        self.kind = ev.kind
        self.call_id = ev.call_id or ""
        self.name = ev.name or ""
        self.args: list[str] = []
        self.has_text = False
        self.reasoning = c.Reasoning(
            redacted=ev.redacted, encrypted_content=ev.encrypted_content, item_id=ev.item_id
        )


class GeminiStreamEncoder:
    def __init__(self, request: c.Request) -> None:
        self._request = request
        self._id = ""
        self._model = request.model
        self._blocks: dict[int, _Block] = {}
        self._pending: str | None = None  # a bare Gemini signature for the next part
        self._has_text = False
        self._done = False
        self._tail: bytes | None = None  # ``"modelVersion":...}`` of every frame
        self._cut: ProxyError | None = None  # a call whose arguments are not an object
        # Grounding goes on the last chunk: the searches, and each text block's text and
        # citations, for the supports' byte offsets (the text kept as the Responses
        # encoder keeps its chunks: references, no copies).
        self._searches: list[c.ServerToolUse] = []
        self._texts: dict[int, list[str]] = {}
        self._cites: dict[int, list[c.Citation]] = {}

    def encode(self, event: c.StreamEvent) -> bytes:
        if self._done:
            return b""
        return _HANDLERS[type(event)](self, event)

    def encode_deltas(self, index: int, texts: list[str]) -> bytes:
        return encode_deltas_with(self.encode, self._text_deltas, index, texts)

    def _text_deltas(self, index: int, texts: list[str]) -> bytes | None:
        """``_on_delta``'s text case for a run, once the frame tail is known."""
        block = self._blocks.get(index)
        tail = self._tail
        if self._done or block is None or block.kind not in ("text", "refusal"):
            return None
        if self._pending is not None or tail is None:
            return None
        self._has_text = True
        if index in self._texts:
            self._texts[index].extend(texts)
        end = _TEXT_TAIL + b"," + tail + b"\r\n\r\n"
        return _DELTA_HEAD + (end + _DELTA_HEAD).join(map(_encoder.encode, texts)) + end

    def _frame(self, body: Any) -> bytes:
        return encode_event(_encoder.encode(body), end=b"\r\n\r\n")

    def _chunk(
        self,
        parts: list[wire.Part],
        finish: str | None = None,
        message: str | None = None,
        usage: wire.UsageMetadata | None = None,
        grounded: dict[str, Any] | None = None,
    ) -> bytes:
        if parts and not parts[0].thought and self._pending is not None:
            parts[0].thought_signature, self._pending = self._pending, None
        cand = candidate(parts, finish, message)
        cand.grounding_metadata = grounded
        return self._frame(
            wire.GenerateContentResponse(
                candidates=[cand],
                usage_metadata=usage,
                model_version=self._model,
                response_id=self._id,
            )
        )

    def _on_start(self, ev: c.MessageStart) -> bytes:
        self._id = ev.id
        self._model = ev.model or self._request.model
        self._tail = None
        return b""

    def _on_block_start(self, ev: c.BlockStart) -> bytes:
        self._blocks.setdefault(ev.index, _Block(ev))
        if ev.kind in ("text", "refusal"):
            self._texts.setdefault(ev.index, [])
        return b""

    def _on_delta(self, ev: c.BlockDelta) -> bytes:
        block = self._blocks.get(ev.index)
        if block is None or not ev.text:
            return b""
        if block.kind == "tool_call":
            block.args.append(ev.text)
            return b""
        if block.kind == "reasoning":
            block.has_text = True
            block.args.append(ev.text)  # the thought's text travels with its carrier
            return self._delta_frame(ev.text, _THOUGHT_TAIL)
        if block.kind in ("text", "refusal"):
            self._has_text = True
            self._texts[ev.index].append(ev.text)
            if self._pending is not None:
                return self._chunk([wire.Part(text=ev.text)])
            return self._delta_frame(ev.text, _TEXT_TAIL)
        return b""

    def _delta_frame(self, text: str, part_tail: bytes) -> bytes:
        """A one-part frame from byte templates (the hot path: one per delta); the
        same bytes ``_chunk`` writes."""
        tail = self._tail
        if tail is None:
            tail = self._tail = _encoder.encode(
                wire.GenerateContentResponse(model_version=self._model, response_id=self._id)
            )[1:]
        return _DELTA_HEAD + _encoder.encode(text) + part_tail + b"," + tail + b"\r\n\r\n"

    def _on_signature(self, ev: c.BlockSignature) -> bytes:
        block = self._blocks.get(ev.index)
        if block is not None:
            reasoning_carry.take(block.reasoning, ev)
        return b""

    def _on_citations(self, ev: c.Citations) -> bytes:
        if ev.index in self._texts:
            self._cites.setdefault(ev.index, []).extend(ev.citations)
        return b""  # grounding supports, on the last chunk

    def _on_server_tool(self, ev: c.ServerTool) -> bytes:
        if hosted_code.is_code(ev.use):  # a code run: its two parts, where it ran
            return self._chunk(code_run.parts_out(ev.use))
        if sr.is_search(ev.use):
            self._searches.append(ev.use)
        return b""  # grounding, on the last chunk

    def _grounding(self) -> dict[str, Any] | None:
        if not self._searches and not self._cites:
            return None
        texts = [("".join(t), self._cites.get(i)) for i, t in self._texts.items()]
        return grounding_out(self._searches, texts)

    def _on_stop(self, ev: c.BlockStop) -> bytes:
        block = self._blocks.pop(ev.index, None)
        if block is None:
            return b""
        if block.kind == "tool_call":
            call = c.ToolCall(id=block.call_id, name=block.name, arguments="".join(block.args))
            try:
                args = args_out(call)
            except ProxyError as e:
                # Cut inside its arguments: left out if the token limit cut it (the
                # finish says), else the 502 it is.
                self._cut = e
                return b""
            fc = wire.FunctionCall(id=call.id, name=call.name, args=args)
            return self._chunk([wire.Part(function_call=fc)])
        if block.kind in ("reasoning", "redacted_reasoning"):
            r = block.reasoning
            r.text = "".join(block.args)
            own = r.thought_signature
            if own is not None and block.has_text:  # Gemini's own, where Gemini put it
                return self._chunk([wire.Part(text="", thought=True, thought_signature=own)])
            carrier = own or signatures.client_signature(r)
            if carrier is not None:
                out = self._chunk([wire.Part(text="")]) if self._pending is not None else b""
                self._pending = carrier  # for the next non-thought part
                return out
        return b""

    def _on_finish(self, ev: c.Finish) -> bytes:
        out = b"".join(self._on_stop(c.BlockStop(index=i)) for i in list(self._blocks))
        if self._cut is not None and ev.stop_reason != "max_tokens":
            raise self._cut
        finish, message, extra = finish_out(ev.stop_reason, self._has_text, ev.refusal_explanation)
        parts: list[wire.Part] = []
        if extra:
            parts.append(wire.Part(text=extra))
        elif self._pending is not None:
            parts.append(wire.Part(text=""))
        self._done = True
        meta = self._grounding()
        return out + self._chunk(parts, finish, message, usage_out(ev.usage), meta)

    def _on_error(self, ev: c.StreamError) -> bytes:
        self._done = True
        return self._frame(error_response(ev.status, ev.kind, ev.message))


_HANDLERS: dict[type, Callable[[GeminiStreamEncoder, Any], bytes]] = {
    c.MessageStart: GeminiStreamEncoder._on_start,
    c.BlockStart: GeminiStreamEncoder._on_block_start,
    c.BlockDelta: GeminiStreamEncoder._on_delta,
    c.BlockSignature: GeminiStreamEncoder._on_signature,
    c.Citations: GeminiStreamEncoder._on_citations,
    c.ServerTool: GeminiStreamEncoder._on_server_tool,
    c.BlockStop: GeminiStreamEncoder._on_stop,
    c.Finish: GeminiStreamEncoder._on_finish,
    c.StreamError: GeminiStreamEncoder._on_error,
}
