"""Access to the recorded real traffic in tests/fixtures/captures (copied from
shared/fixtures/captures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "captures"


def capture_names(prefix: str = "") -> list[str]:
    return sorted(
        p.stem
        for p in CAPTURES.glob("*.json")
        if p.stem.startswith(prefix) and not p.stem.startswith("errors_")
    )


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CAPTURES / f"{name}.json").read_text())
    return data


def response_body(name: str) -> bytes:
    body = load(name)["response"]["body"]
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def request_body(name: str) -> bytes:
    return json.dumps(load(name)["request"]["body"]).encode()
