"""Optional OpenTelemetry spans, one per exchange, with the GenAI semantic-convention
attributes. Without the ``otel`` extra installed this is a no-op and imports nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..client_values import loggable

if TYPE_CHECKING:
    from ..routing import Upstream
    from ..routing.plan import Attempts

try:  # pragma: no cover - exercised by whichever environment the tests run in
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    _tracer: Any = trace.get_tracer("proxai_asgi")
except ImportError:  # pragma: no cover
    _tracer = None


def start(client_protocol: str) -> Any:
    """A started span for one exchange, or None when OpenTelemetry is absent."""
    if _tracer is None:
        return None
    span = _tracer.start_span("chat proxai", kind=trace.SpanKind.SERVER)
    span.set_attribute("gen_ai.operation.name", "chat")
    span.set_attribute("proxai.client.protocol", client_protocol)
    return span


def finish(
    span: Any,
    *,
    upstream: Upstream | None,
    request_model: str | None,
    response_model: str | None,
    status: int,
    input_tokens: int | None,
    output_tokens: int | None,
    stream: bool,
    routing: Attempts | None = None,
) -> None:
    if span is None:
        return
    attrs: dict[str, Any] = {"http.response.status_code": status, "proxai.stream": stream}
    if upstream is not None:
        from ..protocols import get_codec

        attrs["gen_ai.system"] = get_codec(upstream.protocol).system
        attrs["proxai.upstream.protocol"] = upstream.protocol
    # Models are the client's (and the upstream's) strings: escaped like log lines.
    if request_model:
        attrs["gen_ai.request.model"] = loggable(request_model)
    if response_model:
        attrs["gen_ai.response.model"] = loggable(response_model)
    if input_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = output_tokens
    if routing is not None:
        attrs["proxai.routing.attempts"] = routing.count
        if routing.served_by is not None:
            attrs["proxai.routing.fallback_index"] = routing.served_by.fallback_index
            attrs["proxai.routing.key_id"] = routing.served_by.upstream.key_id
        if routing.failures:
            attrs["proxai.routing.failures"] = list(routing.failures)
    span.set_attributes(attrs)
    if status >= 500 or status == 0:
        span.set_status(Status(StatusCode.ERROR))
    span.end()
