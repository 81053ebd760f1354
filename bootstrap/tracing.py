"""OpenTelemetry traces: off by default, on when an OTLP endpoint is configured.

``start_tracing`` installs the SDK's tracer provider for one process (web, worker,
stdio) when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
is set (``Settings.trace_endpoint``) and ``OTEL_SDK_DISABLED`` is not true. The rest
of the standard ``OTEL_*`` variables (headers, timeout, sampler, batch delays,
resource attributes) are read by the SDK itself, as its documentation says.

When tracing is off nothing here is imported: the code that makes spans uses the
OpenTelemetry API alone, whose default tracer makes non-recording spans (measured in
BENCHMARKS.md, "Tracing").

What leaves the process is filtered by :class:`ScrubbingExporter`: spans carry ids,
names, durations, tool names, request ids, SQL text with its placeholders and error
types, never memory text, query text, tokens or passwords. Exception events keep
only their type (a database error's message can quote a row's values) and no status
carries a description.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from config.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_log = logging.getLogger(__name__)

#: Attribute keys an exception event may keep: its type, never its message or stack.
_EXCEPTION_KEYS = frozenset({"exception.type", "exception.escaped"})
#: Span attributes that never leave the process, whoever set them (a library's
#: instrumentation may add them in a later version).
_DROPPED_KEYS = frozenset(
    {
        "db.statement.parameters",
        "db.query.parameter",
        "http.request.header.authorization",
        "http.url",
        "url.full",
        "url.query",
        "enduser.credential",
    }
)


@dataclass
class Tracing:
    """A started tracer provider; :meth:`shutdown` flushes and stops it."""

    provider: TracerProvider

    def shutdown(self) -> None:
        try:
            self.provider.shutdown()
        except Exception:  # pragma: no cover - an exporter failing at exit
            _log.warning("the trace exporter failed to flush at shutdown", exc_info=True)


def start_tracing(settings: Settings, process: str) -> Tracing | None:
    """Install tracing for this process when it is configured; None when it is off.

    ``process`` names the process kind (``web``, ``worker``, ``stdio``): the
    service name is ``OTEL_SERVICE_NAME`` when set, else ``ownsona-<process>``.
    """
    if settings.trace_endpoint is None:
        return None
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, Any] = {"ownsona.process": process}
    if settings.trace_service_name is None:
        attributes[SERVICE_NAME] = f"ownsona-{process}"
    # Resource.create merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over ours.
    provider = TracerProvider(resource=Resource.create(attributes))
    exporter = cast("SpanExporter", ScrubbingExporter(OTLPSpanExporter()))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    # SQL spans: statement text with its placeholders, never the bound values
    # (capture_parameters stays off); no sqlcommenter (it would write our trace
    # context into statements the database logs).
    instrumentor = PsycopgInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=provider, enable_commenter=False)
    _log.info("tracing on: OTLP/HTTP to %s", settings.trace_endpoint)
    return Tracing(provider)


def scrubbed(span: ReadableSpan) -> ReadableSpan:
    """``span`` without anything that could hold a user's text or a secret."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status

    events = [
        Event(
            event.name,
            {k: v for k, v in (event.attributes or {}).items() if k in _EXCEPTION_KEYS},
            event.timestamp,
        )
        for event in span.events
        if event.name == "exception"
    ]
    attributes = {k: v for k, v in (span.attributes or {}).items() if k not in _DROPPED_KEYS}
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=Status(span.status.status_code),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class ScrubbingExporter:
    """A span exporter that passes each span through :func:`scrubbed` to another."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([scrubbed(span) for span in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)
