"""The Anthropic Messages stream grammar, both directions, as explicit state machines.

Grammar (what the API sends and what clients rely on)::

    message_start
    ( content_block_start  content_block_delta*  content_block_stop )*
    message_delta          (stop_reason, stop_sequence, stop_details, usage)
    message_stop
    -- or, at any point, ``error`` and nothing after; ``ping`` anywhere.

Every frame is ``event: <type>`` + ``data: <json>`` with the event name equal to the
data's ``type``. Block ``index`` values are 0, 1, 2, ... in order; only one block is
open at a time; ``tool_use`` blocks start with ``input: {}`` and their input arrives as
``input_json_delta`` fragments; ``message_delta`` always carries ``usage``.

``AnthropicStreamDecoder`` (upstream SSE -> canonical events) is lenient about what
it does not know (unknown event, block and delta types are skipped, ``ping`` ignored,
a missing ``event:`` line is fine: the data's ``type`` decides) and strict about
ordering (a delta for an unknown block, a duplicate start or stop, a delta whose type
does not match its block -> ``ProxyError`` 502).

``AnthropicStreamEncoder`` (canonical events -> client SSE) serialises blocks: while
one block is open on the wire, blocks that start later are buffered and flushed, in
start order, as complete start/delta/stop runs when the open block stops. Interleaved
parallel tool calls therefore come out as sequential blocks.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING, Any, get_args

import msgspec

from ... import canonical as c
from ... import ids, reasoning_carry
from ...errors import ProxyError
from ...lazy_decoder import LazyDecoder
from ...sse import frame_head
from .._kit import hosted_code, tokens
from .._kit import search_results as sr
from .._kit.delta_runs import Held, decoded, encode_deltas_with
from . import wire
from .errors import error_event, stream_error_from_body
from .response import (
    KNOWN_OUTPUT_TYPES,
    arguments_json,
    citation_out,
    client_signature,
    client_tool_id,
    custom_tool_input,
    final_stop,
    merge_usage,
    stop_from_anthropic,
    usage_in,
    usage_out,
)
from .search_stream import SearchHold, ServerBlocks, search_frames

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...sse import SSEEvent

_event_decoder: LazyDecoder[wire.StreamEvent] = LazyDecoder(wire.StreamEvent)
_raw_event_decoder: LazyDecoder[wire.RawEvent] = LazyDecoder(wire.RawEvent)
_encoder = msgspec.json.Encoder()

KNOWN_EVENT_TYPES = frozenset(cls.__struct_config__.tag for cls in get_args(wire.StreamEvent))
KNOWN_DELTA_TYPES = frozenset(cls.__struct_config__.tag for cls in get_args(wire.Delta))


# ==================================================================== decoder


class DecoderState(enum.Enum):
    AWAIT_MESSAGE_START = enum.auto()
    IN_MESSAGE = enum.auto()  # blocks, message_delta
    DONE = enum.auto()  # a terminal event was returned (or a violation raised)


# As a module global for the per-event test: on Python 3.11 ``DecoderState.DONE`` is a
# ~65 ns metaclass attribute lookup (a global is ~10 ns).
_DECODER_DONE = DecoderState.DONE
_IN_MESSAGE = DecoderState.IN_MESSAGE
_DELTA_EVENT, _TEXT_DELTA = wire.ContentBlockDeltaEvent, wire.TextDelta


# Which upstream block kind each delta type may extend.
_DELTA_BLOCK: dict[type[wire.Delta], str] = {
    wire.TextDelta: "text",
    wire.CitationsDelta: "text",
    wire.ThinkingDelta: "thinking",
    wire.SignatureDelta: "thinking",
    wire.InputJsonDelta: "tool_use",
}


class _UpstreamBlock:
    __slots__ = ("cites", "got_json", "got_text", "index", "kind", "open", "start_input", "text")

    def __init__(self, kind: str, index: int, start_input: dict[str, Any] | None = None) -> None:
        self.kind = kind  # text / thinking / redacted_thinking / tool_use
        self.index = index  # canonical index
        self.open = True
        self.got_json = False
        self.start_input = start_input
        # URL citations, held to the stop to be given their spans in the block's text
        # (kept only once the block has one: Anthropic cites before the text it cites)
        # (a citation after some text keeps no span: ``span_of`` finds its cited text)
        self.cites: list[c.Citation] | None = None
        self.text: list[str] = []
        self.got_text = False


class AnthropicStreamDecoder:
    def __init__(self) -> None:
        self.state = DecoderState.AWAIT_MESSAGE_START
        self._blocks: dict[int, _UpstreamBlock] = {}  # by upstream index
        self._skipped: set[int] = set()  # server-tool and unknown blocks
        self._servers = ServerBlocks()
        self._next_index = 0
        self._usage = wire.Usage(input_tokens=0)
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._explanation: str | None = None
        self._held = Held()

    # ---- entry points

    def feed(self, event: SSEEvent) -> list[c.StreamEvent]:
        if self.state is _DECODER_DONE:
            return []
        data = event.data
        if not data or data == b"[DONE]" or data.isspace():
            return []
        held = self._held  # the frame that ended a delta run comes decoded
        try:
            ev = held.value if event is held.event else _event_decoder.decode(data)
        except msgspec.ValidationError as e:
            return self._unknown(data, e)
        except (msgspec.DecodeError, ValueError) as e:
            raise self._violation(f"malformed JSON in upstream stream: {e}") from None
        return _DECODER_HANDLERS[type(ev)](self, ev)

    def delta_run(self, events: list[SSEEvent], start: int) -> tuple[int, int, list[str]]:
        """``feed``'s ``_on_block_delta`` for a run of text deltas of one open text
        block (see ``StreamDecoder.delta_run``)."""
        i = start
        if self.state is not _IN_MESSAGE or b'"text_delta"' not in events[i].data:
            return i, -1, []  # (surely no text delta: feed's, not decoded twice)
        texts: list[str] = []
        wire_index: int | None = None  # the upstream's index of the run's block
        index = -1
        for e, ev in decoded(_event_decoder.decode, events, start):
            if type(ev) is _DELTA_EVENT and type(ev.delta) is _TEXT_DELTA:
                if ev.index != wire_index:  # the first delta: its block must be open text
                    block = self._blocks.get(ev.index) if index < 0 else None
                    if block is not None and block.open and block.kind == "text":
                        wire_index, index = ev.index, block.index
                if ev.index == wire_index:
                    text = ev.delta.text
                    if text:
                        texts.append(text)
                    i += 1
                    continue
            self._held.put(e, ev)
            break
        if texts and wire_index is not None:
            block = self._blocks[wire_index]
            block.got_text = True
            if block.cites is not None:
                block.text.extend(texts)
        return i, index, texts

    def close(self) -> list[c.StreamEvent]:
        if self.state is DecoderState.DONE:
            return []
        self.state = DecoderState.DONE
        return [
            c.StreamError(
                status=502, kind="bad_gateway", message="upstream stream ended before message_stop"
            )
        ]

    # ---- helpers

    def _violation(self, message: str) -> ProxyError:
        self.state = DecoderState.DONE
        return ProxyError.bad_gateway(message)

    def _require_message(self, what: str) -> None:
        if self.state is not DecoderState.IN_MESSAGE:
            raise self._violation(f"upstream sent {what} before message_start")

    def _new_block(self, upstream_index: int, kind: str, **kw: Any) -> _UpstreamBlock:
        self._require_message("content_block_start")
        if upstream_index in self._blocks or upstream_index in self._skipped:
            raise self._violation(f"upstream started content block {upstream_index} twice")
        block = _UpstreamBlock(kind, self._next_index, **kw)
        self._next_index += 1
        self._blocks[upstream_index] = block
        return block

    def _skip_block(self, upstream_index: int) -> list[c.StreamEvent]:
        self._require_message("content_block_start")
        if upstream_index in self._blocks or upstream_index in self._skipped:
            raise self._violation(f"upstream started content block {upstream_index} twice")
        self._skipped.add(upstream_index)
        return []

    def _unknown(self, data: bytes, error: Exception) -> list[c.StreamEvent]:
        """The union did not decode: skip an unknown event/block/delta type, or raise
        for a malformed known one."""
        try:
            raw = _raw_event_decoder.decode(data)
        except (msgspec.DecodeError, ValueError):
            raise self._violation(f"malformed upstream stream event: {error}") from None
        if raw.type not in KNOWN_EVENT_TYPES:
            return []
        if raw.index is not None:
            if (
                raw.type == "content_block_start"
                and raw.content_block is not None
                and raw.content_block.type not in KNOWN_OUTPUT_TYPES
            ):
                return self._skip_block(raw.index)
            if (
                raw.type == "content_block_delta"
                and raw.delta is not None
                and raw.delta.type not in KNOWN_DELTA_TYPES
            ):
                return []
        raise self._violation(f"malformed upstream {raw.type} event: {error}")

    # ---- events

    def _on_message_start(self, ev: wire.MessageStartEvent) -> list[c.StreamEvent]:
        if self.state is not DecoderState.AWAIT_MESSAGE_START:
            raise self._violation("upstream sent message_start twice")
        self.state = DecoderState.IN_MESSAGE
        msg = ev.message
        self._usage = msg.usage
        return [c.MessageStart(id=msg.id, model=msg.model, usage=usage_in(msg.usage))]

    def _on_block_start(self, ev: wire.ContentBlockStartEvent) -> list[c.StreamEvent]:
        b = ev.content_block
        out: list[c.StreamEvent]
        if isinstance(b, wire.TextBlock):
            i = self._new_block(ev.index, "text").index
            out = [c.BlockStart(index=i, kind="text")]
            if b.text:  # some servers carry the first fragment here
                out.append(c.BlockDelta(index=i, text=b.text))
        elif isinstance(b, wire.ThinkingBlock):
            i = self._new_block(ev.index, "thinking").index
            out = [c.BlockStart(index=i, kind="reasoning")]
            if b.thinking:
                out.append(c.BlockDelta(index=i, text=b.thinking))
            if b.signature:
                out.append(_signature_event(i, b.signature))
        elif isinstance(b, wire.RedactedThinkingBlock):
            i = self._new_block(ev.index, "redacted_thinking").index
            out = [c.BlockStart(index=i, kind="redacted_reasoning", redacted=b.data)]
        elif isinstance(b, wire.ToolUseBlock):
            # The real API starts with input {} and streams input_json_delta; a server
            # that puts the whole input here and sends no delta is honoured at stop.
            i = self._new_block(ev.index, "tool_use", start_input=b.input or None).index
            out = [c.BlockStart(index=i, kind="tool_call", call_id=b.id, name=b.name)]
        else:  # server_tool_use, web_search_tool_result: one ServerTool at the result
            out = self._skip_block(ev.index)
            use = self._servers.start(ev.index, b)
            if use is not None:
                out = [c.ServerTool(index=self._next_index, use=use)]
                self._next_index += 1
        return out

    def _on_block_delta(self, ev: wire.ContentBlockDeltaEvent) -> list[c.StreamEvent]:
        if ev.index in self._skipped:
            self._servers.delta(ev.index, ev.delta)
            return []
        block = self._blocks.get(ev.index)
        if block is None:
            self._require_message("content_block_delta")
            raise self._violation(f"upstream sent a delta for unknown content block {ev.index}")
        if not block.open:
            raise self._violation(f"upstream sent a delta for closed content block {ev.index}")
        d = ev.delta
        if _DELTA_BLOCK[type(d)] != block.kind:
            raise self._violation(
                f"upstream sent a {d.__struct_config__.tag} for a {block.kind} block"
            )
        i = block.index
        if isinstance(d, wire.TextDelta):
            if block.cites is not None:
                block.text.append(d.text)
            block.got_text = block.got_text or bool(d.text)
            return [c.BlockDelta(index=i, text=d.text)] if d.text else []
        if isinstance(d, wire.InputJsonDelta):
            block.got_json = True
            return [c.BlockDelta(index=i, text=d.partial_json)] if d.partial_json else []
        if isinstance(d, wire.ThinkingDelta):
            return [c.BlockDelta(index=i, text=d.thinking)] if d.thinking else []
        if isinstance(d, wire.SignatureDelta):
            return [_signature_event(i, d.signature)]
        x = d.citation
        if x.url is None:
            return []  # document locations have no URL: no canonical shape
        cite = c.Citation(url=x.url, title=x.title, cited_text=x.cited_text)
        if block.got_text:
            return [c.Citations(index=i, citations=[cite])]
        if block.cites is None:
            block.cites = []
        block.cites.append(cite)
        return []  # given at the stop, with its span

    def _on_block_stop(self, ev: wire.ContentBlockStopEvent) -> list[c.StreamEvent]:
        if ev.index in self._skipped:
            self._servers.stop(ev.index)
            return []
        block = self._blocks.get(ev.index)
        if block is None:
            self._require_message("content_block_stop")
            raise self._violation(f"upstream stopped unknown content block {ev.index}")
        if not block.open:
            raise self._violation(f"upstream stopped content block {ev.index} twice")
        return self._stop(block)

    def _stop(self, block: _UpstreamBlock) -> list[c.StreamEvent]:
        block.open = False
        out: list[c.StreamEvent] = []
        if block.start_input and not block.got_json:
            out.append(c.BlockDelta(index=block.index, text=arguments_json(block.start_input)))
        if block.cites:
            cites = sr.with_spans("".join(block.text), block.cites)
            out.append(c.Citations(index=block.index, citations=cites))
        out.append(c.BlockStop(index=block.index))
        return out

    def _on_message_delta(self, ev: wire.MessageDeltaEvent) -> list[c.StreamEvent]:
        self._require_message("message_delta")
        d = ev.delta
        self._stop_reason = d.stop_reason or self._stop_reason
        self._stop_sequence = d.stop_sequence or self._stop_sequence
        if d.stop_details is not None and d.stop_details.explanation:
            self._explanation = d.stop_details.explanation
        self._usage = merge_usage(self._usage, ev.usage)
        return []

    def _on_message_stop(self, ev: wire.MessageStopEvent) -> list[c.StreamEvent]:
        self._require_message("message_stop")
        out: list[c.StreamEvent] = []
        for block in self._blocks.values():  # insertion order == canonical index order
            if block.open:  # never closed by the upstream: close it ourselves
                out.extend(self._stop(block))
        out.append(
            c.Finish(
                stop_reason=stop_from_anthropic(self._stop_reason),
                usage=usage_in(self._usage),
                stop_sequence=self._stop_sequence,
                refusal_explanation=self._explanation,
            )
        )
        self.state = DecoderState.DONE
        return out

    def _on_ping(self, ev: wire.PingEvent) -> list[c.StreamEvent]:
        return []

    def _on_error(self, ev: wire.ErrorEvent) -> list[c.StreamEvent]:
        self.state = DecoderState.DONE
        status, kind, message = stream_error_from_body(ev.error)
        code = ev.error.type or None
        return [c.StreamError(status=status, kind=kind, message=message, code=code)]


def _signature_event(index: int, signature: str) -> c.BlockSignature:
    carried = reasoning_carry.restored_tokens(signature)  # a carrier of ours, back
    if carried:
        return c.BlockSignature(index=index, **carried)
    return c.BlockSignature(index=index, signature=signature)


_DECODER_HANDLERS: dict[type, Callable[[AnthropicStreamDecoder, Any], list[c.StreamEvent]]] = {
    wire.ContentBlockDeltaEvent: AnthropicStreamDecoder._on_block_delta,
    wire.ContentBlockStartEvent: AnthropicStreamDecoder._on_block_start,
    wire.ContentBlockStopEvent: AnthropicStreamDecoder._on_block_stop,
    wire.MessageStartEvent: AnthropicStreamDecoder._on_message_start,
    wire.MessageDeltaEvent: AnthropicStreamDecoder._on_message_delta,
    wire.MessageStopEvent: AnthropicStreamDecoder._on_message_stop,
    wire.PingEvent: AnthropicStreamDecoder._on_ping,
    wire.ErrorEvent: AnthropicStreamDecoder._on_error,
}


# ==================================================================== encoder


class EncoderState(enum.Enum):
    BEFORE_MESSAGE = enum.auto()  # nothing sent yet
    IN_MESSAGE = enum.auto()  # message_start sent
    DONE = enum.auto()  # message_stop or error sent: nothing more


_ENCODER_DONE = EncoderState.DONE  # as a module global: see _DECODER_DONE


_FRAME_PREFIX: dict[type, bytes] = {
    cls: frame_head(str(cls.__struct_config__.tag)) for cls in get_args(wire.StreamEvent)
}


def frame(event: wire.StreamEvent) -> bytes:
    return _FRAME_PREFIX[type(event)] + _encoder.encode(event) + b"\n\n"


# Text, thinking and input_json deltas are most of a stream, so they are written from a
# byte template instead of building ``ContentBlockDeltaEvent(delta=TextDelta(...))`` and
# encoding it: the block's head (``_delta_head``, fixed once the block has its wire
# index) + the JSON-encoded fragment + ``_DELTA_TAIL``, bytes for bytes what ``frame``
# writes for those Structs. With ``_on_block_delta``'s fast path, ``encode`` of a delta
# went from ~510 to ~190 ns.
def _delta_field(cls: type[wire.Delta], field: str) -> bytes:
    return b',"delta":{"type":%b,"%b":' % (
        _encoder.encode(cls.__struct_config__.tag),
        field.encode(),
    )


# What follows the wire index in a delta frame, by block kind (up to the fragment).
_DELTA_FIELD: dict[str, bytes] = {
    "text": _delta_field(wire.TextDelta, "text"),
    "refusal": _delta_field(wire.TextDelta, "text"),
    "reasoning": _delta_field(wire.ThinkingDelta, "thinking"),
    "tool_call": _delta_field(wire.InputJsonDelta, "partial_json"),
}
_DELTA_PREFIX = (
    _FRAME_PREFIX[wire.ContentBlockDeltaEvent] + b'{"type":"content_block_delta","index":'
)
_DELTA_TAIL = b"}}\n\n"


def _delta_head(kind: str, wire_index: int) -> bytes:
    """The frame of a delta of a ``kind`` block up to the fragment's JSON string."""
    return _DELTA_PREFIX + b"%d" % wire_index + _DELTA_FIELD[kind]


class _ClientBlock:
    """A canonical block as it goes out: ``wire_index`` is None until the block is on
    the wire (text blocks open lazily, on their first non-empty delta)."""

    __slots__ = (
        "args",
        "delta_head",
        "direct",
        "index",
        "kind",
        "reasoning",
        "text",
        "tool_kind",
        "wire_index",
    )

    def __init__(self, start: c.BlockStart) -> None:
        self.index = start.index  # canonical
        self.kind = start.kind
        self.tool_kind = start.tool_kind
        self.wire_index: int | None = None
        self.delta_head = b""  # see _delta_head; set with wire_index
        # On the wire, and its deltas go out as they come (text, thinking, function
        # tool input; not refusal text, which is also kept, nor custom tool input, held
        # to the stop): ``_on_block_delta``'s fast path.
        self.direct = False
        # A reasoning block's tokens (its text goes out as it comes).
        self.reasoning: c.Reasoning | None = None
        if start.kind == "reasoning":
            self.reasoning = c.Reasoning(
                encrypted_content=start.encrypted_content, item_id=start.item_id
            )
        self.args: list[str] = []  # custom tool input, sent whole at stop
        self.text: list[str] | None = None  # a text block's text, kept to cite from


class AnthropicStreamEncoder:
    def __init__(self, request: c.Request) -> None:
        self._request = request
        self.state = EncoderState.BEFORE_MESSAGE
        self._upstream_id = ""
        self._next_wire = 0
        self._tools = 0
        self._has_text = False
        self._refusal: str | None = None
        # the block that owns the wire, and blocks waiting for it (with their events)
        self._block: _ClientBlock | None = None
        self._waiting: deque[int] = deque()
        self._buffers: dict[int, list[c.StreamEvent]] = {}
        self._seen: set[int] = set()  # every canonical index ever started
        # A client that offered search: the answer is held until its first search
        # (``search_stream``).
        # (Gemini grounding last: the search blocks must go before the text citing them)
        self._hold = SearchHold() if request.search_results_last else None
        self._searches = 0

    def encode(self, event: c.StreamEvent) -> bytes:
        if self.state is _ENCODER_DONE:
            return b""
        hold = self._hold
        if hold is None:
            return _ENCODER_HANDLERS[type(event)](self, event)
        events = hold.take(event)
        if not hold.holding:
            self._hold = None
        out = b""
        for e in events:
            if self.state is not _ENCODER_DONE:
                out += _ENCODER_HANDLERS[type(e)](self, e)
        return out

    def encode_deltas(self, index: int, texts: list[str]) -> bytes:
        return encode_deltas_with(self.encode, self._direct_deltas, index, texts)

    def _direct_deltas(self, index: int, texts: list[str]) -> bytes | None:
        """``_on_block_delta``'s hot path for a run: one join over the block's head."""
        block = self._block
        if self.state is _ENCODER_DONE or block is None or not block.direct:
            return None
        if index != block.index:
            return None
        if block.text is not None:
            block.text += texts
        head = block.delta_head
        return head + (_DELTA_TAIL + head).join(map(_encoder.encode, texts)) + _DELTA_TAIL

    # ---- message level

    def _start(self, ev: c.MessageStart | None) -> bytes:
        """message_start, from the upstream's MessageStart or synthesised."""
        if self.state is not EncoderState.BEFORE_MESSAGE:
            return b""
        self.state = EncoderState.IN_MESSAGE
        usage = ev.usage if ev is not None else None
        if usage is not None:
            wu = usage_out(usage)
        else:
            wu = wire.Usage(
                input_tokens=tokens.estimate_input_tokens(self._request),
                cache_creation_input_tokens=0,
                cache_read_input_tokens=0,
            )
        wu.output_tokens = 1
        self._upstream_id = ev.id if ev is not None else ""
        msg = wire.Message(
            id=ids.derive("msg_", self._upstream_id),
            model=(ev.model if ev is not None else "") or self._request.model,
            usage=wu,
        )
        return frame(wire.MessageStartEvent(message=msg))

    def _on_message_start(self, ev: c.MessageStart) -> bytes:
        return self._start(ev)

    def _on_finish(self, ev: c.Finish) -> bytes:
        out = [self._start(None)]
        if self._block is not None:
            out.append(self._close_active())
        out.append(self._drain(force=True))
        stop, details = final_stop(
            ev.stop_reason, self._tools > 0, self._refusal, ev.refusal_explanation
        )
        if stop == "refusal" and ev.refusal_explanation and not self._has_text:
            out.append(self._whole_text_block(ev.refusal_explanation))
        delta = wire.MessageDelta(
            stop_reason=stop, stop_sequence=ev.stop_sequence, stop_details=details
        )
        usage = usage_out(ev.usage, self._searches)
        out.append(frame(wire.MessageDeltaEvent(delta=delta, usage=usage)))
        out.append(frame(wire.MessageStopEvent()))
        self.state = EncoderState.DONE
        return b"".join(out)

    def _on_error(self, ev: c.StreamError) -> bytes:
        self.state = EncoderState.DONE
        return frame(error_event(ev.kind, ev.message))

    def _on_server_tool(self, ev: c.ServerTool) -> bytes:
        """A search's two blocks, between the blocks around it (others: no shape)."""
        out = self._start(None)
        search = sr.is_search(ev.use)
        if not search and not hosted_code.is_code(ev.use):
            return out
        if self._block is not None:
            out += self._close_active()
        out += self._drain(force=True)
        self._searches += search and ev.use.error is None  # a failed search is not billed
        first = self._next_wire
        self._next_wire += 2
        return out + search_frames(ev.use, first, frame)

    # ---- block routing: one block on the wire at a time

    def _on_block_start(self, ev: c.BlockStart) -> bytes:
        head = self._start(None)
        if ev.index in self._seen:
            return head  # a duplicate start: ignored
        self._seen.add(ev.index)
        if self._block is None:
            return head + self._open(ev)
        self._waiting.append(ev.index)
        self._buffers[ev.index] = [ev]
        return head

    def _on_block_delta(self, ev: c.BlockDelta) -> bytes:
        block = self._block
        if block is not None and block.direct and ev.index == block.index and ev.text:
            if block.text is not None:
                block.text.append(ev.text)
            return block.delta_head + _encoder.encode(ev.text) + _DELTA_TAIL  # the hot path
        return self._on_block_event(ev)

    def _on_block_event(
        self, ev: c.BlockDelta | c.BlockSignature | c.Citations | c.BlockStop
    ) -> bytes:
        if self._block is not None and ev.index == self._block.index:
            if isinstance(ev, c.BlockStop):
                return self._close_active() + self._drain(force=False)
            return self._apply(ev)
        buffer = self._buffers.get(ev.index)
        if buffer is not None:
            buffer.append(ev)
        return b""  # an event for an unknown (or already stopped) block: ignored

    def _drain(self, *, force: bool) -> bytes:
        """Put waiting blocks on the wire in start order, each with its buffered events,
        while they are complete (``force``: complete them, at Finish)."""
        out: list[bytes] = []
        while self._block is None and self._waiting:
            events = self._buffers.pop(self._waiting.popleft())
            start = events[0]
            assert isinstance(start, c.BlockStart)
            out.append(self._open(start))
            stopped = False
            for e in events[1:]:
                if isinstance(e, c.BlockStop):
                    stopped = True
                    break
                out.append(self._apply(e))  # type: ignore[arg-type]
            if stopped or force:
                out.append(self._close_active())
        return b"".join(out)

    # ---- the block on the wire

    def _wire_start(self, block: wire.OutputBlock) -> bytes:
        b = self._block
        assert b is not None
        b.wire_index = self._next_wire
        self._next_wire += 1
        if b.kind in _DELTA_FIELD:
            b.delta_head = _delta_head(b.kind, b.wire_index)
            b.direct = b.kind in ("text", "reasoning") or (
                b.kind == "tool_call" and b.tool_kind != "custom"
            )
            if b.kind == "text":
                b.text = []  # kept (references) for the cited text of a span citation
        return frame(wire.ContentBlockStartEvent(index=b.wire_index, content_block=block))

    def _delta(self, delta: wire.Delta) -> bytes:
        assert self._block is not None and self._block.wire_index is not None
        return frame(wire.ContentBlockDeltaEvent(index=self._block.wire_index, delta=delta))

    def _open(self, ev: c.BlockStart) -> bytes:
        self._block = _ClientBlock(ev)
        if ev.kind == "reasoning":
            return self._wire_start(wire.ThinkingBlock())
        if ev.kind == "redacted_reasoning":
            return self._wire_start(wire.RedactedThinkingBlock(data=ev.redacted or ""))
        if ev.kind == "tool_call":
            call_id = client_tool_id(ev.call_id or "", self._upstream_id, self._tools)
            self._tools += 1
            return self._wire_start(wire.ToolUseBlock(id=call_id, name=ev.name or "", input={}))
        return b""  # text / refusal: opened by the first non-empty delta

    def _apply(self, ev: c.BlockDelta | c.BlockSignature | c.Citations) -> bytes:
        block = self._block
        assert block is not None
        kind = block.kind
        if isinstance(ev, c.BlockDelta):
            if not ev.text:
                return b""
            if kind in ("text", "refusal"):
                head = b""
                if block.wire_index is None:
                    head = self._wire_start(wire.TextBlock(text=""))
                    self._has_text = True
                if kind == "refusal":
                    self._refusal = (self._refusal or "") + ev.text
                elif block.text is not None:
                    block.text.append(ev.text)
                return head + block.delta_head + _encoder.encode(ev.text) + _DELTA_TAIL
            if kind == "tool_call" and block.tool_kind == "custom":
                block.args.append(ev.text)
                return b""
            if block.direct:  # reasoning, function tool call
                return block.delta_head + _encoder.encode(ev.text) + _DELTA_TAIL
            return b""  # redacted reasoning has no deltas
        if isinstance(ev, c.BlockSignature):
            if block.reasoning is not None:
                reasoning_carry.take(block.reasoning, ev)
            return b""
        if block.wire_index is None or kind != "text":
            return b""  # citations need text to attach to
        text = "".join(block.text) if block.text is not None else None
        return b"".join(
            self._delta(wire.CitationsDelta(citation=citation_out(x, text))) for x in ev.citations
        )

    def _close_active(self) -> bytes:
        block = self._block
        assert block is not None
        out = b""
        if block.reasoning is not None:
            sig = client_signature(block.reasoning)
            if sig:
                out = self._delta(wire.SignatureDelta(signature=sig))
        elif block.kind == "tool_call" and block.tool_kind == "custom":
            partial = arguments_json(custom_tool_input("".join(block.args)))
            out = self._delta(wire.InputJsonDelta(partial_json=partial))
        if block.wire_index is not None:
            out += frame(wire.ContentBlockStopEvent(index=block.wire_index))
        self._block = None
        return out

    def _whole_text_block(self, text: str) -> bytes:
        index = self._next_wire
        self._next_wire += 1
        self._has_text = True
        return b"".join(
            (
                frame(
                    wire.ContentBlockStartEvent(index=index, content_block=wire.TextBlock(text=""))
                ),
                frame(wire.ContentBlockDeltaEvent(index=index, delta=wire.TextDelta(text=text))),
                frame(wire.ContentBlockStopEvent(index=index)),
            )
        )


_ENCODER_HANDLERS: dict[type, Callable[[AnthropicStreamEncoder, Any], bytes]] = {
    c.BlockDelta: AnthropicStreamEncoder._on_block_delta,
    c.BlockStart: AnthropicStreamEncoder._on_block_start,
    c.BlockSignature: AnthropicStreamEncoder._on_block_event,
    c.Citations: AnthropicStreamEncoder._on_block_event,
    c.BlockStop: AnthropicStreamEncoder._on_block_event,
    c.MessageStart: AnthropicStreamEncoder._on_message_start,
    c.ServerTool: AnthropicStreamEncoder._on_server_tool,
    c.Finish: AnthropicStreamEncoder._on_finish,
    c.StreamError: AnthropicStreamEncoder._on_error,
}
