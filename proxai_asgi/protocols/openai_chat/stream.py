"""The Chat Completions stream grammar, both ways, as explicit state machines.

Decoder (upstream Chat SSE -> canonical events)::

    WAITING --first chunk with a choice--> STREAMING --finish_reason--> TERMINAL
    TERMINAL --usage-only chunk--> STOPPED (Finish with that usage)
    TERMINAL --[DONE] / EOF--> STOPPED (Finish; usage from the finish chunk or zero)
    WAITING | STREAMING --[DONE] / EOF--> FAILED (StreamError 502)
    any --error chunk--> FAILED (StreamError)

Chat has no block events: text, refusal and reasoning deltas are append-only fields and
tool calls are keyed by ``tool_calls[].index``. The decoder opens a canonical block on the
first non-empty fragment of each, closes text/refusal/reasoning when another of these
takes over (so a resumed field opens a fresh block), and closes everything at
``finish_reason``. A tool call does not close the text or refusal before it: content
streamed after a call goes on in the same block, before the call, as the non-streamed
message has it (MP-23; content that only starts after the calls cannot be put before
them, a documented deviation). Chat holds its terminal state until the usage-only chunk
or ``[DONE]``.

Encoder (canonical events -> client Chat SSE)::

    NEW --MessageStart--> OPEN --Finish | StreamError--> DONE

The encoder allocates ``tool_calls[].index`` in BlockStart order and writes every chunk
with the same id / created / model envelope (assembled once, as bytes). A refusal that
starts after content was sent is held back while it repeats that content, and left out if
it is exactly that content (never the same text in ``content`` and ``refusal``).
"""

from __future__ import annotations

import enum
import time
from typing import Annotated, Literal

import msgspec

from ... import canonical as c
from ... import ids
from ...errors import ErrorKind, ProxyError, kind_for_status
from ...lazy_decoder import LazyDecoder
from ...sse import DONE_FRAME, SSEEvent, encode_event
from .._kit.delta_runs import encode_deltas_with
from . import wire as w
from .errors import encode_openai_error, kind_from_fields, status_from_fields
from .response import (
    EMPTY_ANSWER_FINISHES,
    REASONING_SEPARATOR,
    annotations_for,
    fallback_tool_id,
    finish_reason_for,
    stop_from_finish,
    usage_from_wire,
    usage_to_wire,
)

_CHUNK_DEC: LazyDecoder[w.ChunkIn] = LazyDecoder(w.ChunkIn)


# A chunk that only carries content, for ``delta_run``: the fields of ``ChunkIn``, with
# those that would make ``feed`` do anything but append content typed to be null or
# absent, one choice of index 0 and a string ``content``. A chunk that decodes as this
# decodes as ``ChunkIn`` with the same values; any other fails here and goes to ``feed``.
class _ContentDelta(msgspec.Struct, kw_only=True, gc=False):
    role: Literal["assistant"] | None = None
    content: str
    refusal: None = None
    reasoning_content: None = None
    reasoning: None = None
    tool_calls: None = None


class _ContentChoice(msgspec.Struct, kw_only=True, gc=False):
    index: Literal[0] = 0
    delta: _ContentDelta
    finish_reason: None = None
    logprobs: None = None


class _ContentChunk(msgspec.Struct, kw_only=True, gc=False):
    id: str | None = None
    object: Annotated[str, msgspec.Meta(min_length=1)] | None = None  # "" is Azure's filter
    created: int | float | None = None
    model: str | None = None
    choices: tuple[_ContentChoice]
    usage: w.Usage | None = None
    error: None = None


_CONTENT_DEC: LazyDecoder[_ContentChunk] = LazyDecoder(_ContentChunk)
_ANY_DEC = msgspec.json.Decoder()
_ENC = msgspec.json.Encoder()


def _error_event_body(data: bytes) -> w.ErrorIn:
    """The error of an ``event: error`` frame, in the OpenAI or the Anthropic shape."""
    try:
        obj = _ANY_DEC.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
        return w.ErrorIn(message=data.decode("utf-8", "replace")[:300])
    if isinstance(obj, dict):
        inner = obj.get("error")
        src = inner if isinstance(inner, dict) else obj
        return w.ErrorIn(message=src.get("message"), type=src.get("type"), code=src.get("code"))
    return w.ErrorIn(message=str(obj)[:300])


def _stream_error(err: w.ErrorIn) -> c.StreamError:
    status = status_from_fields(err.type, err.code)
    kind: ErrorKind = kind_from_fields(err.type, err.code) or kind_for_status(status)
    message = err.message if isinstance(err.message, str) and err.message else None
    # The provider's code (``context_length_exceeded``, ``insufficient_quota``) for
    # the failure's class; its type when it names no code.
    code = next((v for v in (err.code, err.type) if isinstance(v, str) and v), None)
    return c.StreamError(
        status=status, kind=kind, message=message or "upstream stream error", code=code
    )


# ============================================================================ decoder


class DecoderState(enum.Enum):
    WAITING = "waiting"  # nothing yet
    STREAMING = "streaming"  # MessageStart emitted, content flowing
    TERMINAL = "terminal"  # finish_reason seen, Finish held for usage / [DONE]
    STOPPED = "stopped"  # Finish emitted
    FAILED = "failed"  # StreamError emitted


# The states as module globals, for the per-chunk tests: on Python 3.11 ``DecoderState.X``
# is a ~65 ns metaclass attribute lookup (a global is ~10 ns), and a chunk tests its
# state up to six times.
_WAITING = DecoderState.WAITING
_STREAMING = DecoderState.STREAMING
_TERMINAL = DecoderState.TERMINAL
_STOPPED = DecoderState.STOPPED
_FAILED = DecoderState.FAILED


class ChatStreamDecoder:
    """Upstream Chat SSE events -> canonical stream events."""

    __slots__ = (
        "_fallback_usage",
        "_id",
        "_model",
        "_next",
        "_open",
        "_reasoning",
        "_refusal",
        "_representable",
        "_saw_refusal",
        "_state",
        "_stop",
        "_text",
        "_tools",
    )

    def __init__(self) -> None:
        self._state = _WAITING
        self._id = ""
        self._model = ""
        self._next = 0  # next canonical block index
        self._open: list[int] = []  # open canonical blocks, in opening order
        self._text: int | None = None
        self._reasoning: int | None = None
        self._refusal: int | None = None
        # chat tool_calls[].index -> (canonical block, custom?, call id)
        self._tools: dict[int, tuple[int, bool, str]] = {}
        self._saw_refusal = False
        self._representable = False  # a text, refusal or tool call block was started
        self._stop: c.StopReason | None = None
        self._fallback_usage: c.Usage | None = None

    @property
    def state(self) -> DecoderState:
        return self._state

    # ---- block bookkeeping

    def _start(self, out: list[c.StreamEvent], ev: c.BlockStart) -> None:
        self._open.append(ev.index)
        out.append(ev)

    def _new_index(self) -> int:
        i = self._next
        self._next += 1
        return i

    def _stop_block(self, out: list[c.StreamEvent], index: int | None) -> None:
        if index is not None:
            self._open.remove(index)
            out.append(c.BlockStop(index=index))

    def _close_text(self, out: list[c.StreamEvent]) -> None:
        self._stop_block(out, self._text)
        self._text = None

    def _close_reasoning(self, out: list[c.StreamEvent]) -> None:
        self._stop_block(out, self._reasoning)
        self._reasoning = None

    def _close_refusal(self, out: list[c.StreamEvent]) -> None:
        self._stop_block(out, self._refusal)
        self._refusal = None

    def _close_all(self, out: list[c.StreamEvent]) -> None:
        out.extend(c.BlockStop(index=i) for i in self._open)
        self._open.clear()
        self._text = self._reasoning = self._refusal = None
        self._tools.clear()

    # ---- terminal transitions

    def _finish(self, usage: c.Usage | None) -> list[c.StreamEvent]:
        self._state = _STOPPED
        return [c.Finish(stop_reason=self._stop, usage=usage or self._fallback_usage or c.Usage())]

    def _fail(self, ev: c.StreamError) -> list[c.StreamEvent]:
        self._state = _FAILED
        return [ev]

    def _end(self) -> list[c.StreamEvent]:
        """``[DONE]`` or EOF."""
        if self._state is _TERMINAL:
            return self._finish(None)
        if self._state in (_WAITING, _STREAMING):
            return self._fail(
                c.StreamError(
                    status=502,
                    kind="bad_gateway",
                    message="upstream Chat stream ended before finish_reason",
                )
            )
        return []

    # ---- the machine

    def feed(self, event: SSEEvent) -> list[c.StreamEvent]:
        state = self._state
        if state is _FAILED:
            return []
        data = event.data
        if data[:1] != b"{":  # every chunk is a JSON object: only other data is checked
            stripped = data.strip()
            if stripped == b"[DONE]":
                return self._end()
            if not stripped:
                return []  # keep-alive
        if state is _STOPPED:
            raise ProxyError.bad_gateway(
                "upstream Chat stream sent data after its final usage chunk"
            )
        if event.event == "error":
            return self._fail(_stream_error(_error_event_body(data)))
        try:
            chunk = _CHUNK_DEC.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as e:
            raise ProxyError.bad_gateway(
                f"upstream sent an invalid Chat stream chunk: {e}"
            ) from None

        if chunk.error is not None:
            return self._fail(_stream_error(chunk.error))
        if chunk.object == "":
            return []  # Azure content-filter annotations, not part of the answer

        choices = chunk.choices
        if choices is None or len(choices) != 1:
            if not choices:
                if chunk.usage is None:
                    return []  # e.g. Azure's prompt_filter_results preamble
                if state is _TERMINAL:
                    return self._finish(usage_from_wire(chunk.usage))
                raise ProxyError.bad_gateway(
                    "upstream Chat stream sent a usage-only chunk (choices: []) before "
                    + ("any choice" if state is _WAITING else "finish_reason")
                )
            raise ProxyError.bad_gateway(
                f"upstream Chat stream chunk has {len(choices)} choices; exactly one is "
                "required (choices are alternative answers and cannot be merged)"
            )
        choice = choices[0]
        if choice.index != 0:
            raise ProxyError.bad_gateway(
                f"upstream Chat stream chunk has choice index {choice.index}; only 0 is allowed"
            )
        lp = choice.logprobs
        if lp is not None and (lp.content or lp.refusal):
            raise ProxyError.bad_gateway(
                "upstream Chat stream carries logprobs, which cannot be translated"
            )

        out: list[c.StreamEvent] = []
        if state is _WAITING:
            self._id = chunk.id or ""
            self._model = chunk.model or ""
            out.append(
                c.MessageStart(id=self._id, model=self._model, created=int(chunk.created or 0))
            )
            self._state = state = _STREAMING
        else:  # (the inequality first: the only test a well-behaved chunk pays)
            if chunk.id != self._id and chunk.id and self._id:
                raise ProxyError.bad_gateway(
                    f"upstream Chat stream changed id from {self._id!r} to {chunk.id!r}"
                )
            if chunk.model != self._model and chunk.model and self._model:
                raise ProxyError.bad_gateway(
                    f"upstream Chat stream changed model from {self._model!r} to {chunk.model!r}"
                )

        delta = choice.delta
        if delta is not None:
            if delta.role is not None and delta.role != "assistant":
                raise ProxyError.bad_gateway(f"upstream Chat stream delta has role {delta.role!r}")
            if state is _TERMINAL:
                if delta.content or delta.refusal or delta.reasoning_content or delta.tool_calls:
                    raise ProxyError.bad_gateway(
                        "upstream Chat stream sent content after finish_reason"
                    )
            else:
                self._delta(delta, out)

        if choice.finish_reason is not None and state is _STREAMING:
            if not self._representable and choice.finish_reason not in EMPTY_ANSWER_FINISHES:
                # As decode_response: nothing a client can be given (an empty answer cut
                # by length or content_filter is still a representable stop).
                raise ProxyError.bad_gateway(
                    "upstream Chat stream has no representable answer: no content, no "
                    f"refusal and no tool calls (finish_reason {choice.finish_reason!r})"
                )
            self._close_all(out)
            self._stop = stop_from_finish(choice.finish_reason, self._saw_refusal)
            if chunk.usage is not None:
                # Not final usage by the spec's rule, but the best figure when the
                # upstream never sends the usage-only chunk (DeepSeek-style servers).
                self._fallback_usage = usage_from_wire(chunk.usage)
            self._state = _TERMINAL
        return out

    def delta_run(self, events: list[SSEEvent], start: int) -> tuple[int, int, list[str]]:
        """``feed`` for a run of content-only chunks while the text block is open and
        no reasoning is (see ``StreamDecoder.delta_run``)."""
        i, n = start, len(events)
        index = self._text
        if self._state is not _STREAMING or index is None or self._reasoning is not None:
            return i, -1, []
        decode = _CONTENT_DEC.decode
        sid, model = self._id, self._model
        texts: list[str] = []
        while i < n:
            e = events[i]
            if e.event is not None or b'"content"' not in e.data:
                break  # an event name ("error"), or surely no content: feed's
            try:
                chunk = decode(e.data)
            except (msgspec.DecodeError, ValueError):
                break
            if chunk.id != sid and chunk.id and sid:
                break  # feed's error: the id changed
            if chunk.model != model and chunk.model and model:
                break
            text = chunk.choices[0].delta.content
            if text:
                texts.append(text)
            i += 1
        return i, index, texts

    def _delta(self, d: w.DeltaIn, out: list[c.StreamEvent]) -> None:
        reasoning = d.reasoning_content
        if reasoning is None and d.reasoning is not None and isinstance(d.reasoning, str):
            reasoning = d.reasoning
        # (Each close is tested here first: most chunks have nothing to close.)
        if reasoning:
            if self._text is not None:
                self._close_text(out)
            if self._refusal is not None:
                self._close_refusal(out)
            if self._reasoning is None:
                self._reasoning = self._new_index()
                self._start(out, c.BlockStart(index=self._reasoning, kind="reasoning"))
            out.append(c.BlockDelta(index=self._reasoning, text=reasoning))
        if d.content:
            if self._reasoning is not None:
                self._close_reasoning(out)
            if self._text is None:
                self._representable = True
                self._text = self._new_index()
                self._start(out, c.BlockStart(index=self._text, kind="text"))
            out.append(c.BlockDelta(index=self._text, text=d.content))
        if d.refusal:
            if self._reasoning is not None:
                self._close_reasoning(out)
            self._saw_refusal = True
            if self._refusal is None:
                self._representable = True
                self._refusal = self._new_index()
                self._start(out, c.BlockStart(index=self._refusal, kind="refusal"))
            out.append(c.BlockDelta(index=self._refusal, text=d.refusal))
        if d.tool_calls:
            for tc in d.tool_calls:
                self._tool_fragment(tc, out)

    def _tool_fragment(self, tc: w.DeltaToolCallIn, out: list[c.StreamEvent]) -> None:
        key = tc.index
        if key is None:  # index-less servers: a new id starts a new call, else the last goes on
            key = next((k for k, v in self._tools.items() if v[2] == tc.id), -1)
            if key < 0:
                key = len(self._tools) if tc.id or not self._tools else max(self._tools)
        fn = tc.function
        part: w.FunctionIn | w.CustomIn | None
        if tc.type == "custom" or (fn is None and tc.custom is not None):
            custom, part = True, tc.custom
            fragment = part.input if part is not None else None
        else:
            custom, part = False, fn
            fragment = fn.arguments if fn is not None else None
        known = self._tools.get(key)
        if known is None:
            name = part.name if part is not None else None
            if not tc.id or not name:
                raise ProxyError.bad_gateway(
                    f"upstream Chat stream tool call {key} starts without an id and a name"
                )
            # Text and refusal stay open beside the call: a Chat message is its content,
            # then its tool calls (MP-23), so content that comes after the call still
            # belongs to the block before it, as in the non-streamed message.
            if self._reasoning is not None:
                self._close_reasoning(out)
            self._representable = True
            index = self._new_index()
            self._tools[key] = (index, custom, tc.id)
            self._start(
                out,
                c.BlockStart(
                    index=index,
                    kind="tool_call",
                    call_id=tc.id,
                    name=name,
                    tool_kind="custom" if custom else "function",
                ),
            )
        else:
            index = known[0]
        if fragment:
            if not isinstance(fragment, str):
                raise ProxyError.bad_gateway(
                    f"upstream Chat stream tool call {key} arguments not a string"
                )
            out.append(c.BlockDelta(index=index, text=fragment))

    def close(self) -> list[c.StreamEvent]:
        return self._end()


# ============================================================================ encoder


class EncoderState(enum.Enum):
    NEW = "new"  # nothing written
    OPEN = "open"  # role chunk written
    DONE = "done"  # terminal written; nothing more


_NEW = EncoderState.NEW  # as module globals: see _WAITING
_OPEN = EncoderState.OPEN
_DONE = EncoderState.DONE

_TEXT, _REASONING, _REFUSAL, _TOOL, _IGNORED = range(5)

_CHOICE_TAIL = b',"logprobs":null,"finish_reason":null}]}\n\n'
# The hot deltas are written from byte templates: the chunk prefix (with the delta's key
# and, for tool calls, its index) + the JSON-encoded fragment + a constant tail. Bytes
# for bytes what ``_chunk(w.DeltaOut(...))`` writes (``DeltaOut``'s field order), without
# building two or three Structs per delta.
_TEXT_TAIL = b"}" + _CHOICE_TAIL
_TOOL_TAIL = b"}}]}" + _CHOICE_TAIL
_FUNCTION_CALL_TAIL = b"}}" + _CHOICE_TAIL  # legacy ``delta.function_call``


class _Block:
    __slots__ = (
        "citations",
        "custom",
        "end",
        "kind",
        "pre",
        "seen",
        "start",
        "tail",
        "tool_index",
    )

    def __init__(self, kind: int, start: int = 0) -> None:
        self.kind = kind
        self.tool_index = -1  # tool calls: the Chat tool_calls[].index
        self.custom = False
        self.start = start  # text: content offset where the block begins
        self.end = -1  # text: content offset where it ended (-1: still open)
        self.seen = False  # reasoning, tool calls: a fragment was written
        self.citations: list[c.Citation] | None = None
        self.pre = b""  # tool calls: the chunk up to the argument fragment (see _TOOL_TAIL)
        self.tail = _TOOL_TAIL


class ChatStreamEncoder:
    """Canonical stream events -> Chat SSE bytes for the client."""

    __slots__ = (
        "_blocks",
        "_content",
        "_content_len",
        "_head",
        "_include_usage",
        "_legacy",
        "_model",
        "_pre",
        "_pre_content",
        "_pre_reasoning",
        "_reasoning_emitted",
        "_refusal_emitted",
        "_refusal_held",
        "_response_id",
        "_state",
        "_text_blocks",
        "_tools",
    )

    def __init__(self, request: c.Request) -> None:
        self._state = _NEW
        self._include_usage = request.include_usage
        self._legacy = request.legacy_functions
        self._model = request.model
        self._response_id = ""
        self._head = b""
        self._pre = b""
        self._pre_content = b""  # _pre + the delta's key: see _TEXT_TAIL
        self._pre_reasoning = b""
        self._blocks: dict[int, _Block] = {}
        self._text_blocks: list[_Block] = []  # text blocks with citations, in order
        self._tools = 0
        self._content: list[str] = []  # the content fragments sent, for the RS-3 check
        self._content_len = 0
        self._refusal_emitted = False
        # Refusal text held back while it repeats the content already sent (None: not
        # holding; the refusal streams as it comes).
        self._refusal_held: str | None = None
        self._reasoning_emitted = False

    @property
    def state(self) -> EncoderState:
        return self._state

    # ---- framing

    def _chunk(self, delta: w.DeltaOut) -> bytes:
        return self._pre + _ENC.encode(delta) + _CHOICE_TAIL

    def _open(self, upstream_id: str, model: str, created: int) -> bytes:
        self._response_id = upstream_id
        head = (
            b'{"id":'
            + _ENC.encode(ids.derive("chatcmpl-", upstream_id))
            + b',"object":"chat.completion.chunk","created":'
            + str(created or int(time.time())).encode()
            + b',"model":'
            + _ENC.encode(model or self._model)
            + b","
        )
        self._head = head
        self._pre = b"data: " + head + b'"choices":[{"index":0,"delta":'
        self._pre_content = self._pre + b'{"content":'
        self._pre_reasoning = self._pre + b'{"reasoning_content":'
        self._state = _OPEN
        return self._chunk(w.DeltaOut(role="assistant", content=""))

    def _error(self, ev: c.StreamError) -> bytes:
        self._state = _DONE
        err = ProxyError(ev.status, ev.message, kind=ev.kind)  # type: ignore[arg-type]
        return encode_event(encode_openai_error(err)) + DONE_FRAME

    # ---- events

    def encode_deltas(self, index: int, texts: list[str]) -> bytes:
        return encode_deltas_with(self.encode, self._content_deltas, index, texts)

    def _content_deltas(self, index: int, texts: list[str]) -> bytes | None:
        """``_delta``'s text case for a run: one join over the content template."""
        b = self._blocks.get(index)
        if self._state is not _OPEN or b is None or b.kind != _TEXT:
            return None
        self._content_len += sum(map(len, texts))
        self._content += texts
        pre = self._pre_content
        return pre + (_TEXT_TAIL + pre).join(map(_ENC.encode, texts)) + _TEXT_TAIL

    def encode(self, event: c.StreamEvent) -> bytes:
        if self._state is _DONE:
            return b""
        if isinstance(event, c.BlockDelta):  # the hot path
            return self._delta(event) if self._state is _OPEN else b""
        if isinstance(event, c.StreamError):
            return self._error(event)
        prefix = b""
        if isinstance(event, c.MessageStart):
            if self._state is _OPEN:
                return b""  # a second start: ignored
            return self._open(event.id, event.model, event.created)
        if self._state is _NEW:
            prefix = self._open("", "", 0)  # robust to a stream without MessageStart
        if isinstance(event, c.BlockStart):
            return prefix + self._block_start(event)
        if isinstance(event, c.BlockStop):
            b = self._blocks.get(event.index)
            if b is not None and b.kind == _TEXT and b.end < 0:
                b.end = self._content_len
            elif b is not None and b.kind == _TOOL and not b.seen and not b.custom:
                # A call without arguments (Anthropic ``input: {}``): OpenAI always
                # sends a JSON object, and clients parse it.
                b.seen = True
                return prefix + b.pre + b'"{}"' + b.tail
            return prefix
        if isinstance(event, c.Citations):
            b = self._blocks.get(event.index)
            if b is not None and b.kind == _TEXT:
                if b.citations is None:
                    b.citations = []
                    self._text_blocks.append(b)
                b.citations.extend(event.citations)
            return prefix
        if isinstance(event, c.Finish):
            return prefix + self._finish(event)
        return prefix  # BlockSignature: Chat has no place for opaque reasoning

    def _block_start(self, ev: c.BlockStart) -> bytes:
        if ev.index in self._blocks:
            return b""
        if ev.kind == "text":
            self._blocks[ev.index] = _Block(_TEXT, self._content_len)
            return b""
        if ev.kind == "reasoning":
            self._blocks[ev.index] = _Block(_REASONING)
            return b""
        if ev.kind == "refusal":
            self._blocks[ev.index] = _Block(_REFUSAL)
            return b""
        if ev.kind != "tool_call":
            self._blocks[ev.index] = _Block(_IGNORED)  # redacted reasoning
            return b""
        if self._legacy:
            return self._function_call_start(ev)
        b = _Block(_TOOL)
        b.tool_index = self._tools
        b.custom = ev.tool_kind == "custom"
        b.pre = (
            self._pre
            + b'{"tool_calls":[{"index":'
            + str(b.tool_index).encode()
            + (b',"custom":{"input":' if b.custom else b',"function":{"arguments":')
        )
        self._tools += 1
        self._blocks[ev.index] = b
        call_id = ev.call_id or fallback_tool_id(self._response_id, b.tool_index)
        name = ev.name or ""
        if b.custom:
            call = w.ToolCallDeltaOut(
                index=b.tool_index,
                id=call_id,
                type="custom",
                custom=w.CustomDeltaOut(name=name, input=""),
            )
        else:
            call = w.ToolCallDeltaOut(
                index=b.tool_index,
                id=call_id,
                type="function",
                function=w.FunctionDeltaOut(name=name, arguments=""),
            )
        return self._chunk(w.DeltaOut(tool_calls=[call]))

    def _function_call_start(self, ev: c.BlockStart) -> bytes:
        """A legacy ``functions`` client reads one ``delta.function_call`` per answer
        (the upstream was asked for one call): the first; any other is not its shape."""
        if self._tools:
            self._blocks[ev.index] = _Block(_IGNORED)
            return b""
        self._tools = 1
        b = self._blocks[ev.index] = _Block(_TOOL)
        b.pre = self._pre + b'{"function_call":{"arguments":'
        b.tail = _FUNCTION_CALL_TAIL
        start = w.FunctionDeltaOut(name=ev.name or "", arguments="")
        return self._chunk(w.DeltaOut(function_call=start))

    def _delta(self, ev: c.BlockDelta) -> bytes:
        text = ev.text
        if not text:
            return b""
        b = self._blocks.get(ev.index)
        if b is None:
            return b""
        kind = b.kind
        if kind == _TEXT:
            self._content_len += len(text)
            self._content.append(text)
            return self._pre_content + _ENC.encode(text) + _TEXT_TAIL
        if kind == _TOOL:
            b.seen = True
            return b.pre + _ENC.encode(text) + b.tail
        if kind == _REASONING:
            if not b.seen:  # first fragment of this reasoning block
                b.seen = True
                if self._reasoning_emitted:
                    text = REASONING_SEPARATOR + text
                self._reasoning_emitted = True
            return self._pre_reasoning + _ENC.encode(text) + _TEXT_TAIL
        if kind == _REFUSAL:
            held = self._refusal_held
            if held is None and self._content_len and not self._refusal_emitted:
                held = ""  # content went out first: hold while the refusal repeats it
            if held is not None:
                held += text
                if "".join(self._content).startswith(held):
                    self._refusal_held = held
                    return b""
                self._refusal_held = None  # not a repeat of the content: send it all
                text = held
            self._refusal_emitted = True
            return self._chunk(w.DeltaOut(refusal=text))
        return b""

    def _release_refusal(self) -> bytes:
        """At the finish, the refusal held back goes out as ``delta.refusal`` unless it
        is exactly the content sent (spec refusal-and-status: never the same text in both
        ``content`` and ``refusal``; sent content cannot be taken back, so the repeated
        refusal is the one left out). Decided on the whole content, as the non-streamed
        answer decides."""
        held, self._refusal_held = self._refusal_held, None
        if not held or held == "".join(self._content):
            return b""
        self._refusal_emitted = True
        return self._chunk(w.DeltaOut(refusal=held))

    def _finish(self, ev: c.Finish) -> bytes:
        self._state = _DONE
        out = self._release_refusal()
        if (
            ev.stop_reason == "refusal"
            and ev.refusal_explanation
            and self._content_len == 0
            and not self._refusal_emitted
        ):
            out += self._chunk(w.DeltaOut(refusal=ev.refusal_explanation))
        if self._text_blocks:
            annotations: list[w.AnnotationOut] = []
            for b in self._text_blocks:
                end = b.end if b.end >= 0 else self._content_len
                if end > b.start:  # citations of an empty text block have nothing to cite
                    annotations.extend(annotations_for(b.citations or (), b.start, end))
            if annotations:
                out += self._chunk(w.DeltaOut(annotations=annotations))
        finish = finish_reason_for(ev.stop_reason, self._tools > 0, self._legacy)
        out += self._pre + b'{},"logprobs":null,"finish_reason":' + _ENC.encode(finish) + b"}]}\n\n"
        if self._include_usage:
            out += (
                b"data: "
                + self._head
                + b'"choices":[],"usage":'
                + _ENC.encode(usage_to_wire(ev.usage))
                + b"}\n\n"
            )
        return out + DONE_FRAME
