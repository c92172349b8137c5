"""Differential run: every recorded exchange through the production middleware, in
every direction, streamed and not; the bytes each client and each upstream received,
written to one JSON file. Run it before and after a refactor and compare the files:

    python scripts/differential.py /tmp/before.json
    python scripts/differential.py /tmp/after.json --compare /tmp/before.json

Upstreams are replayed in-process (an ``httpx.MockTransport`` behind the middleware's
``http_client``), so the run needs no sockets and is deterministic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.codec import PROTOCOLS, ProtocolName
from tests.helpers.captures import captures_dir

PREFIX: dict[str, ProtocolName] = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}
BASE = {
    "openai_chat_completions": "http://up.test/v1",
    "openai_responses": "http://up.test/v1",
    "anthropic_messages": "http://up.test",
    "gemini_generate_content": "http://up.test",
}


def client_call(
    protocol: ProtocolName, stream: bool, body: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """Path and body of a small client request (or the recorded one)."""
    if protocol == "gemini_generate_content":
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        payload = body or {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        payload = {k: v for k, v in payload.items() if k not in ("model", "stream")}
        return f"/v1beta/models/m:{method}", payload
    if protocol == "openai_chat_completions":
        payload = body or {"messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/chat/completions"
    elif protocol == "openai_responses":
        payload = body or {"input": "hi"}
        path = "/v1/responses"
    else:
        payload = body or {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/messages"
    return path, {**payload, "model": "m", "stream": stream}


async def one(
    client: ProtocolName,
    upstream: ProtocolName,
    record: dict[str, Any],
    stream: bool,
    use_request: bool,
) -> dict[str, Any]:
    seen: list[bytes] = []
    resp = record["response"]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        body = resp["body"]
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers = {
            k: v for k, v in resp.get("headers", {}).items() if k.lower() != "content-length"
        }
        return httpx.Response(resp["status"], headers=headers, stream=httpx.ByteStream(raw))

    up_client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    mw = ProxaiMiddleware(
        None,  # type: ignore[arg-type]
        upstream=Upstream(upstream, BASE[upstream], api_key="sk-differential-0000"),
        http_client=up_client,
    )
    request_body = record["request"].get("body") if use_request else None
    path, payload = client_call(client, stream, request_body)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(mw), base_url="http://proxy") as cl:  # type: ignore[arg-type]
        r = await cl.post(path, json=payload, headers={"authorization": "Bearer k"})
    await up_client.aclose()
    keep = {k: v for k, v in r.headers.items() if k not in ("date", "server")}
    return {
        "status": r.status_code,
        "headers": sorted(keep.items()),
        "body": r.content.decode("utf-8", "replace"),
        "upstream_request": [s.decode("utf-8", "replace") for s in seen],
    }


async def run() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(captures_dir().glob("*.json")):
        record = json.loads(path.read_text())
        origin = PREFIX.get(path.name.split("_", 1)[0])
        if origin is None or "response" not in record:
            continue
        for client in PROTOCOLS:
            for stream in (False, True):
                # The recorded answer, to every client.
                key = f"{path.stem}|{origin}->{client}|stream={stream}"
                out[key] = await one(client, origin, record, stream, use_request=False)
                # The recorded request, toward every upstream (answered by the recording
                # of the same name when the protocols agree, else by a text answer).
                if client == origin or "body" not in record.get("request", {}):
                    continue
                for target in PROTOCOLS:
                    if target == client:
                        continue
                    key = f"{path.stem}|request {client}->{target}|stream={stream}"
                    out[key] = (await one(client, target, _text_record(target), stream, True))[
                        "upstream_request"
                    ]
    return out


def _text_record(protocol: ProtocolName) -> dict[str, Any]:
    name = {
        "openai_chat_completions": "chat_json_text_basic",
        "openai_responses": "responses_json_text_basic",
        "anthropic_messages": "anthropic_json_text_basic",
        "gemini_generate_content": "gemini_json_text_basic",
    }[protocol]
    record: dict[str, Any] = json.loads((captures_dir() / f"{name}.json").read_text())
    return record


def main() -> None:
    time.time = lambda: 1_700_000_000.0  # answers without a timestamp get "now"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument("--compare")
    args = parser.parse_args()
    result = json.loads(json.dumps(asyncio.run(run())))  # tuples as JSON has them
    Path(args.output).write_text(json.dumps(result, indent=1, sort_keys=True))
    print(f"{len(result)} exchanges written to {args.output}")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        differ = [k for k in sorted(set(before) | set(result)) if before.get(k) != result.get(k)]
        for k in differ[:20]:
            print("DIFFERS:", k)
        print(f"{len(differ)} of {len(result)} differ")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
