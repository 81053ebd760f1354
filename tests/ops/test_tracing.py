"""OpenTelemetry traces, end to end: web process + Redis + a separate `ownsona worker`.

The spans go to a local OTLP/HTTP receiver speaking the real protocol (protobuf).
One `remember` must yield one trace holding spans from both processes (the
context rides in the Dramatiq message), with the tool name and request id on
them, and no exported byte may hold the memory's text, the query, the access
token or the login password.
"""

from __future__ import annotations

import uuid

from tests.e2e.server import run_processes
from tests.fixtures.otlp_receiver import ReceivedSpan, otlp_receiver
from tests.ops.lifecycle_helpers import call_tool

SERVER_KIND = 2  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER
CONSUMER_KIND = 5


def _remember_trace(spans: list[ReceivedSpan]) -> str | None:
    """The trace id of the remember call's worker span, once the web side's is in too."""
    for worker in spans:
        if worker.service == "ownsona-worker" and worker.kind == CONSUMER_KIND:
            web = [s for s in spans if s.trace_id == worker.trace_id and s.service == "ownsona-web"]
            if any(s.name == "tool remember" for s in web) and any(
                s.kind == SERVER_KIND for s in web
            ):
                return worker.trace_id
    return None


def test_one_remember_is_one_trace_across_web_and_worker_and_leaks_nothing(
    tmp_path, dsn, redis_url, clean_db
):
    secret_fact = f"My locker code hint is violet-{uuid.uuid4().hex[:10]} under the stairs."
    secret_query = f"where is the violet-{uuid.uuid4().hex[:10]} hint"
    with otlp_receiver() as (endpoint, received):
        env = {
            "DATABASE_URL": dsn,
            "REDIS_URL": redis_url,
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            # Export soon after each span ends, so the test waits less.
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
        with run_processes(tmp_path, env, workers=1) as server:
            token = server.token()
            stored = call_tool(server.url, token, "remember", {"text": secret_fact})
            assert stored["ok"] is True
            call_tool(server.url, token, "recall", {"query": secret_query})
            received.wait_for(lambda s: _remember_trace(s) is not None)
            password = server.env["OWNSONA_LOGIN_PASSWORD"]
        # After both processes stopped (their exporters flushed at shutdown).
        spans = received.snapshot()
        trace_id = _remember_trace(spans)
        assert trace_id is not None
        in_trace = [s for s in spans if s.trace_id == trace_id]
        services = {s.service for s in in_trace}
        assert services == {"ownsona-web", "ownsona-worker"}
        names = {s.name for s in in_trace}
        # The request, the bearer check, the tool call, the queue send, the worker's
        # handling, its embedding and its SQL.
        assert "bearer check" in names
        assert any(n.startswith("send ") for n in names)
        assert any(n.startswith("process ") for n in names)
        assert "embed" in names
        worker_sql = [
            s for s in in_trace if s.service == "ownsona-worker" and "db.statement" in s.attributes
        ]
        assert worker_sql, "the worker's SQL is traced"
        tool = next(s for s in in_trace if s.name == "tool remember")
        worker = next(s for s in in_trace if s.kind == CONSUMER_KIND)
        assert worker.attributes["ownsona.tool"] == "remember"
        assert tool.attributes["ownsona.request_id"] == worker.attributes["ownsona.request_id"]
        # The worker's span is a descendant of the web side's tool span.
        by_id = {s.span_id: s for s in in_trace}
        parent = by_id.get(worker.parent_span_id)
        while parent is not None and parent.span_id != tool.span_id:
            parent = by_id.get(parent.parent_span_id)
        assert parent is not None, "the worker's span hangs under the tool call's"
        # The recall is traced too, in the web process (reads run inline).
        assert any(s.name == "tool recall" for s in spans)
        raw = received.raw()
        for secret in (secret_fact, secret_query, token, password):
            for piece in {secret, secret[:24], secret[-24:]}:
                assert piece.encode() not in raw, "an exported span holds a secret"


def test_an_exception_event_keeps_its_type_and_loses_its_message():
    """A database error's message can quote a row's values: only its type is exported."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from bootstrap.tracing import ScrubbingExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ScrubbingExporter(memory)))  # type: ignore[arg-type]
    tracer = provider.get_tracer("test")
    leaked = "Key (user_id, normalized_text)=(7, my sister lives in porto) already exists."
    try:
        with tracer.start_as_current_span("INSERT") as span:
            span.set_attribute("url.query", "code=abc")
            span.set_attribute("db.system", "postgresql")
            raise ValueError(leaked)
    except ValueError:
        pass
    (exported,) = memory.get_finished_spans()
    assert exported.attributes == {"db.system": "postgresql"}
    (event,) = exported.events
    attributes = dict(event.attributes or {})
    assert attributes["exception.type"] == "ValueError"
    assert set(attributes) <= {"exception.type", "exception.escaped"}
    assert exported.status.description is None
    assert "porto" not in repr(exported.to_json())
