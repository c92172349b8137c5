"""A strict validator of Gemini ``streamGenerateContent?alt=sse`` client streams, and
the gist a Gemini client folds out of a stream or a JSON answer.

Rules checked (what the real API sends and what google-genai / Gemini CLI read):
- only ``data:`` lines, each frame ended by a blank line; no ``event:``, no ``[DONE]``;
- every frame is a ``GenerateContentResponse`` that the google-genai SDK's own type
  accepts, with exactly one candidate (index 0, role ``model``), or a terminal
  ``{"error": {"code": int, "message": str, "status": str}}``;
- every part has exactly one datum (text, functionCall, ...); a functionCall has a name
  and object ``args`` and arrives whole;
- ``responseId`` and ``modelVersion`` are the same on every frame;
- ``finishReason`` appears once, on the last frame, which also carries ``usageMetadata``;
- ``groundingMetadata`` (at most on the last frame of a stream): string queries, chunks
  with a ``web`` uri and title, supports whose ``groundingChunkIndices`` name chunks and
  whose segment is a UTF-8 *byte* span of the answer's text (its non-thought text parts
  joined, the whole stream's) that holds exactly ``segment.text``; a
  ``searchEntryPoint`` has string ``renderedContent``;
- code execution: an ``executableCode`` part ``{language: PYTHON, code}`` and, after
  it, a ``codeExecutionResult`` part ``{outcome: OUTCOME_*, output}``; the gist's
  ``runs`` lists them as ``(code, outcome, output)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from google.genai import types

_DATA_KEYS = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
)


@dataclass
class GeminiStream:
    frames: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    gist: dict[str, Any] = field(default_factory=dict)


def _check_part(p: dict[str, Any]) -> None:
    data = [k for k in _DATA_KEYS if k in p]
    assert len(data) == 1 or (not data and "thoughtSignature" in p), p
    if "functionCall" in p:
        fc = p["functionCall"]
        assert isinstance(fc.get("name"), str) and fc["name"], fc
        assert isinstance(fc.get("args"), dict), fc
    if "thought" in p:
        assert p["thought"] is True and "text" in p, p
    if "executableCode" in p:
        ex = p["executableCode"]
        assert ex.get("language") in _LANGUAGES and isinstance(ex.get("code"), str), ex
    if "codeExecutionResult" in p:
        res = p["codeExecutionResult"]
        assert res.get("outcome") in _OUTCOMES, res
        assert isinstance(res.get("output", ""), str), res


_LANGUAGES = ("PYTHON", "LANGUAGE_UNSPECIFIED")
_OUTCOMES = ("OUTCOME_OK", "OUTCOME_FAILED", "OUTCOME_DEADLINE_EXCEEDED", "OUTCOME_UNSPECIFIED")


def check_grounding(text: str, meta: dict[str, Any]) -> None:
    queries = meta.get("webSearchQueries") or []
    assert all(isinstance(q, str) for q in queries), meta
    chunks = meta.get("groundingChunks") or []
    for ch in chunks:
        web = ch.get("web") or {}
        assert isinstance(web.get("uri"), str) and isinstance(web.get("title"), str), ch
    data = text.encode()
    for sup in meta.get("groundingSupports") or []:
        seg = sup.get("segment") or {}
        start, end = seg.get("startIndex", 0), seg.get("endIndex")
        assert isinstance(start, int) and isinstance(end, int), sup
        assert 0 <= start <= end <= len(data), f"segment {start}:{end} outside the text"
        assert data[start:end].decode() == seg.get("text"), "segment text is not the byte span"
        indices = sup.get("groundingChunkIndices") or []
        assert indices and all(0 <= k < len(chunks) for k in indices), sup
    entry = meta.get("searchEntryPoint")
    if entry is not None:
        assert isinstance(entry.get("renderedContent"), str), entry


def grounding_of(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [
        cand["groundingMetadata"]
        for ch in chunks
        for cand in ch.get("candidates") or []
        if cand.get("groundingMetadata")
    ]
    assert len(found) <= 1, "grounding on more than one frame"
    return found[0] if found else None


def _check_error(err: Any) -> None:
    assert isinstance(err, dict), err
    assert isinstance(err.get("code"), int), err
    assert isinstance(err.get("message"), str), err
    assert isinstance(err.get("status"), str) and err["status"].isupper(), err


def gist_of(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client folds out of answers (one JSON answer or a stream's frames):
    texts and thoughts joined, calls, signatures, finish and usage."""
    text, thoughts = "", ""
    calls: list[tuple[str | None, str, dict[str, Any]]] = []
    runs: list[list[Any]] = []  # [code, outcome, output] (a result follows its code)
    sigs: list[str] = []
    finish = message = None
    usage: dict[str, Any] = {}
    rid = model = None
    for ch in chunks:
        rid, model = ch.get("responseId"), ch.get("modelVersion")
        usage = ch.get("usageMetadata") or usage
        for cand in ch.get("candidates") or []:
            for p in (cand.get("content") or {}).get("parts") or []:
                if p.get("thoughtSignature"):
                    sigs.append(p["thoughtSignature"])
                if p.get("thought"):
                    thoughts += p.get("text", "")
                elif "functionCall" in p:
                    fc = p["functionCall"]
                    calls.append((fc.get("id"), fc["name"], fc.get("args") or {}))
                elif "text" in p:
                    text += p["text"]
                elif "executableCode" in p:
                    runs.append([p["executableCode"]["code"], None, None])
                elif "codeExecutionResult" in p:
                    assert runs and runs[-1][1] is None, "a code result without its code"
                    res = p["codeExecutionResult"]
                    runs[-1][1:] = [res["outcome"], res.get("output", "")]
            finish = cand.get("finishReason") or finish
            message = cand.get("finishMessage") or message
    return {
        "id": rid,
        "model": model,
        "text": text,
        "thoughts": thoughts,
        "calls": calls,
        "runs": [tuple(r) for r in runs],
        "signatures": sigs,
        "finish": finish,
        "finish_message": message,
        "usage": usage,
    }


def validate_gemini_response(body: bytes) -> dict[str, Any]:
    """A non-streamed answer: the SDK's type accepts it; its gist."""
    data = json.loads(body)
    types.GenerateContentResponse.model_validate(data)
    cands = data.get("candidates")
    if cands is not None:
        assert len(cands) == 1 and cands[0].get("index") == 0, cands
        for p in (cands[0].get("content") or {}).get("parts") or []:
            _check_part(p)
    assert "usageMetadata" in data, data
    gist = gist_of([data])
    meta = grounding_of([data])
    if meta is not None:
        check_grounding(gist["text"], meta)
    return gist


def validate_gemini_stream(body: bytes) -> GeminiStream:
    text = body.decode("utf-8")
    assert text.endswith(("\r\n\r\n", "\n\n")), text[-40:]
    out = GeminiStream()
    raw_frames = [f for f in text.replace("\r\n", "\n").split("\n\n") if f]
    assert raw_frames, "empty stream"
    for n, frame in enumerate(raw_frames):
        lines = frame.split("\n")
        assert len(lines) == 1 and lines[0].startswith("data: "), frame
        payload = lines[0][len("data: ") :]
        assert payload != "[DONE]"
        data = json.loads(payload)
        assert out.error is None, "a frame after the error frame"
        if "error" in data:
            _check_error(data["error"])
            assert n == len(raw_frames) - 1, "the error frame is not the last"
            out.error = data["error"]
            continue
        types.GenerateContentResponse.model_validate(data)
        cands = data.get("candidates")
        assert isinstance(cands, list) and len(cands) == 1, data
        cand = cands[0]
        assert cand.get("index") == 0, cand
        content = cand.get("content")
        if content is not None:
            assert content.get("role") == "model", content
            for p in content.get("parts") or []:
                _check_part(p)
        if out.frames:
            first = out.frames[0]
            assert data.get("responseId") == first.get("responseId"), data
            assert data.get("modelVersion") == first.get("modelVersion"), data
        last = n == len(raw_frames) - 1
        assert ("finishReason" in cand) == last, (n, cand)
        if last:
            assert "usageMetadata" in data, data
        out.frames.append(data)
    out.gist = gist_of(out.frames)
    meta = grounding_of(out.frames)
    if meta is not None:
        assert out.frames[-1]["candidates"][0].get("groundingMetadata") is meta, "not last"
        check_grounding(out.gist["text"], meta)
    return out
