"""``GET /metrics``: off by default (the path is the wrapped app's), served under the
mount prefix when on, the text format's content type, OpenMetrics on request; label
values bounded whatever the client sends; OpenTelemetry mirrors the same numbers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.metrics import Metrics, open_metrics
from proxai_asgi.metrics import otel as otel_module
from proxai_asgi.metrics.fields import MAX_NAMES, OTHER, FieldNames

from .helpers import ANTHROPIC, CHAT, GEMINI, Board, Scrape, categories, request


async def app_metrics(scope: Any, receive: Any, send: Any) -> None:
    """The wrapped app: answers every path itself, ``/metrics`` included."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"the app's own " + scope["path"].encode()})


def client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://proxy")


def inner(protocol: Any = ANTHROPIC) -> Upstream:
    return Upstream.inner_app(protocol, name="inner")


@pytest.mark.anyio
async def test_metrics_are_off_by_default_and_the_path_reaches_the_app() -> None:
    app = ProxaiMiddleware(app_metrics, upstream=inner())
    assert app.metrics is None and app.context.accounting.metrics is None
    async with client_of(app) as http:
        r = await http.get("/metrics")
    assert r.text == "the app's own /metrics"


@pytest.mark.anyio
async def test_metrics_are_served_under_the_prefix_and_other_paths_reach_the_app() -> None:
    app = ProxaiMiddleware(app_metrics, upstream=inner(), prefix="/llm", metrics=True)
    async with client_of(app) as http:
        ours = await http.get("/llm/metrics")
        theirs = await http.get("/metrics")
        posted = await http.post("/llm/metrics", content=b"{}")
        openmetrics = await http.get(
            "/llm/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"}
        )
    assert ours.status_code == 200
    assert ours.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE proxai_requests_total counter" in ours.text
    assert theirs.text == "the app's own /metrics"
    assert posted.text == "the app's own /llm/metrics"
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_made_up_model_and_field_never_become_label_values(transport: str, stream: bool) -> None:
    from tests.helpers.servers import serve

    weird_model = "claude-\u2603-session-0123456789abcdef"
    weird_field = "x_session_secret_4f9a"
    board = Board()
    with serve(board) as base:
        up = inner() if transport == "inner" else Upstream(ANTHROPIC, base, name="inner")
        app = ProxaiMiddleware(board, routes=[Route("claude-*", up)], metrics=True)
        with serve(app) as url, httpx.Client(base_url=url, timeout=30) as http:
            path, body = request(CHAT, weird_model, stream=stream)
            body[weird_field] = "sk-not-a-label"
            headers = {"authorization": "Bearer sk-client-key-77", "x-session-affinity": "s-42"}
            r = http.post(path, json=body, headers=headers)
            assert r.status_code == 200
            assert weird_field in r.headers["x-proxai-dropped-fields"]
            m = Scrape.parse(http.get("/metrics").text)
    values = m.label_values()
    for secret in (weird_model, weird_field, "sk-not-a-label", "sk-client-key-77", "s-42"):
        assert not any(secret in v for v in values)
    assert m.total("proxai_dropped_fields_total", field=OTHER) == 1
    assert m.total("proxai_requests_total", route="claude-*", upstream="inner") == 1


def test_field_names_are_kept_only_when_made_of_the_codecs_names() -> None:
    names = FieldNames()
    assert names.bounded("top_k") == "top_k"
    assert names.bounded("tool_choice.allowed_tools") == "tool_choice.allowed_tools"
    assert names.bounded("parts.videoMetadata") == "parts.videoMetadata"
    assert names.bounded("frobnicate") == OTHER
    assert names.bounded("top_k.frobnicate") == OTHER
    assert names.bounded("x" * 500) == OTHER


def test_field_names_stop_at_a_bounded_number_of_values() -> None:
    names = FieldNames()
    names._seen.update(f"name{i}" for i in range(MAX_NAMES))  # as if already admitted
    assert names.bounded("top_k") == OTHER
    assert names.bounded("name7") == "name7"


def test_otel_records_the_same_instruments_through_a_configured_meter_provider() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    from tests.helpers.servers import serve

    board = Board()
    metrics = Metrics(meter_provider=provider)
    app = ProxaiMiddleware(board, upstream=inner(GEMINI), metrics=metrics)
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        for stream in (False, True):
            path, body = request(ANTHROPIC, "gemini-x", stream=stream)
            assert http.post(path, json=body).status_code == 200
        scrape = Scrape.parse(http.get("/metrics").text)
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points[metric.name] = list(metric.data.data_points)
    expected = categories(GEMINI)
    tokens = {p.attributes["gen_ai.token.type"]: p.value for p in points["proxai.tokens"]}
    assert tokens == {k: 2 * v for k, v in expected.items() if v}
    (requests,) = points["proxai.requests"]
    assert requests.value == 2 == scrape.total("proxai_requests_total")
    assert requests.attributes["proxai.client.protocol"] == ANTHROPIC
    assert requests.attributes["proxai.status_class"] == "2xx"
    (duration,) = points["gen_ai.server.request.duration"]
    assert duration.count == 2
    assert duration.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert duration.attributes["gen_ai.operation.name"] == "generate_content"
    assert "error.type" not in duration.attributes  # none on success
    usage = {p.attributes["gen_ai.token.type"]: p for p in points["gen_ai.client.token.usage"]}
    assert usage["output"].sum == 2 * expected["output"]
    (ttft,) = points["gen_ai.server.time_to_first_token"]
    assert ttft.count == 1
    assert {p.value for p in points["proxai.requests.in_flight"]} == {0}


def test_otel_is_used_only_when_an_application_configured_a_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry import metrics as api

    assert otel_module.configured_provider() is None  # the API's default (a proxy)
    monkeypatch.setattr(api, "get_meter_provider", lambda: api.NoOpMeterProvider())
    assert otel_module.configured_provider() is None
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    monkeypatch.setattr(api, "get_meter_provider", lambda: provider)
    assert otel_module.configured_provider() is provider
    assert len(Metrics()._sinks) == 2
    assert len(Metrics(otel=False)._sinks) == 1


def test_open_metrics_takes_a_flag_or_an_instance() -> None:
    assert open_metrics(False) is None
    made = open_metrics(True)
    assert isinstance(made, Metrics)
    assert open_metrics(made) is made
