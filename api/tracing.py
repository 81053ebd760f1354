"""Spans of the web side: one per HTTP request, one per bearer check, one per tool call.

Made with the OpenTelemetry API alone: while tracing is off (the default) its
tracer makes non-recording spans and nothing is exported (``bootstrap.tracing``
turns it on). What a span carries is chosen here: the method, the route template
and path (never the query string: authorization requests carry state and PKCE
values), the status, the request id and the tool name; never arguments, memory
text, query text or credentials.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import falcon
import falcon.asgi
from opentelemetry import baggage, context, trace
from opentelemetry.propagate import extract
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from memory.request_ids import current_request_id

_tracer = trace.get_tracer("ownsona.api")


def tracing_on() -> bool:
    """True once a tracer provider is installed (bootstrap.tracing): until then the
    span helpers below return at once, so tracing off costs a check, not a span."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


#: Baggage entries a tool call hands on to the worker that runs it (tasks.tracing).
TOOL_BAGGAGE = "ownsona.tool"
REQUEST_ID_BAGGAGE = "ownsona.request_id"


class RequestTracing:
    """Falcon middleware: a server span around each request, current while it is served.

    Put it right after the request log, so the request id is known when the span starts.
    A ``traceparent`` header from the caller is honoured as the span's parent.
    """

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        parent = extract({k.lower(): v for k, v in req.headers.items()})
        span = _tracer.start_span(
            f"{req.method} {req.path}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": req.method,
                "url.path": req.path,
                "url.scheme": req.scheme,
            },
        )
        request_id = current_request_id()
        if request_id is not None:
            span.set_attribute("ownsona.request_id", request_id)
        req.context.trace_span = span
        req.context.trace_token = context.attach(trace.set_span_in_context(span, parent))

    async def process_resource(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        resource: object,
        params: dict[str, object],
    ) -> None:
        span: Span | None = req.context.get("trace_span")
        if span is not None and req.uri_template:
            span.update_name(f"{req.method} {req.uri_template}")
            span.set_attribute("http.route", req.uri_template)

    async def process_response(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        resource: object,
        req_succeeded: bool,
    ) -> None:
        span: Span | None = req.context.get("trace_span")
        if span is None:
            return
        status = resp.status_code
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        token = req.context.get("trace_token")
        if token is not None:
            # Attached in another context: nothing of ours to undo.
            with contextlib.suppress(ValueError):
                context.detach(token)


@contextlib.contextmanager
def bearer_span() -> Iterator[Span]:
    """The span of one bearer-token check (the token itself is never recorded)."""
    if not tracing_on():
        yield trace.INVALID_SPAN
        return
    with _tracer.start_as_current_span("bearer check", record_exception=False) as span:
        yield span


@contextlib.contextmanager
def tool_span(tool: str, *, queued: bool) -> Iterator[Span]:
    """The span of one tool call; a queued call's worker joins its trace (tasks.tracing).

    The tool name and request id also ride as baggage, so the worker's span
    carries them without the message's arguments being read.
    """
    if not tracing_on():
        yield trace.INVALID_SPAN
        return
    request_id = current_request_id()
    ctx = baggage.set_baggage(TOOL_BAGGAGE, tool)
    if request_id is not None:
        ctx = baggage.set_baggage(REQUEST_ID_BAGGAGE, request_id, context=ctx)
    token = context.attach(ctx)
    try:
        with _tracer.start_as_current_span(
            f"tool {tool}", record_exception=False, attributes={"ownsona.tool": tool}
        ) as span:
            span.set_attribute("ownsona.queued", queued)
            if request_id is not None:
                span.set_attribute("ownsona.request_id", request_id)
            yield span
    finally:
        context.detach(token)


def tool_outcome(span: Span, error_code: str | None) -> None:
    """Record a tool call's outcome: its documented error code, when it failed."""
    if error_code is not None and span.is_recording():
        span.set_attribute("ownsona.error_code", error_code)
        span.set_status(Status(StatusCode.ERROR))
