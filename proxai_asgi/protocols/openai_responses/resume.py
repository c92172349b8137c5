"""A Responses client's stream encoder made to continue bytes relayed from a Responses
upstream (pass-through), for a continuation spliced after a cut: the events replayed
into it leave its numbering its own, so the relayed frames say what to continue from:
the last ``sequence_number``, and each output item's ``output_index`` and id (the
upstream's message ids are its own; the decoder does not carry them)."""

from __future__ import annotations

from typing import Any, cast

import msgspec

from ...codec import StreamEncoder
from ...sse import SSEDecoder
from . import stream as s
from . import wire as w

# Output items the stream decoder makes blocks of (and the encoder items of), in order.
_KEPT = frozenset({"message", "reasoning", "function_call", "custom_tool_call"})
_decode = msgspec.json.Decoder()


def resume_encoder(encoder: StreamEncoder, relayed: bytes) -> None:
    enc = cast(s.ResponsesStreamEncoder, encoder)
    last_seq = -1
    kept: list[tuple[int, str]] = []  # (output_index, item id) of the items kept
    width = 0
    for frame in SSEDecoder().decode(relayed):
        try:
            data: Any = _decode.decode(frame.data)
        except msgspec.DecodeError:
            continue
        if not isinstance(data, dict):
            continue
        seq = data.get("sequence_number")
        if isinstance(seq, int):
            last_seq = max(last_seq, seq)
        item = data.get("item")
        n = data.get("output_index")
        if data.get("type") == "response.output_item.added" and isinstance(n, int):
            width = max(width, n + 1)
            if isinstance(item, dict) and item.get("type") in _KEPT:
                kept.append((n, str(item.get("id") or "")))
    enc._seq = last_seq + 1
    if len(kept) != len(enc._items):
        return  # not the items the encoder made: its own numbering is all there is
    _renumber(enc, kept, width)


def _renumber(enc: s.ResponsesStreamEncoder, kept: list[tuple[int, str]], width: int) -> None:
    """Move the encoder's items to the upstream's output indices and ids."""
    items: list[Any] = [None] * width
    for ours, item in enumerate(enc._items):
        n, item_id = kept[ours]
        if item is not None:
            item.id = item_id
        items[n] = item
    enc._items = items
    for block in enc._blocks.values():
        if isinstance(block, s._TextBlock):
            msg = block.msg
            if msg.n < len(kept) and msg.item_id != kept[msg.n][1]:
                msg.n, msg.item_id = kept[msg.n]
            cls = w.RefusalDelta if block.refusal else w.OutputTextDelta
            block.delta_head = s._delta_head(cls, msg.item_id, msg.n, "content_index", block.ci)
        else:
            block.n, block.item_id = kept[block.n]
            if isinstance(block, s._ToolBlock):
                delta = w.CustomInputDelta if block.kind == "custom" else w.ArgumentsDelta
                block.delta_head = s._delta_head(delta, block.item_id, block.n)
            elif block.summary:
                block.delta_head = s._delta_head(
                    w.SummaryTextDelta, block.item_id, block.n, "summary_index", 0
                )
            else:
                block.delta_head = s._delta_head(
                    w.ReasoningTextDelta, block.item_id, block.n, "content_index", 0
                )
