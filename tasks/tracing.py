"""One trace from web to worker: the trace context rides in the Dramatiq message.

:class:`TraceMiddleware` makes a producer span when a message is sent and writes
the current context (W3C ``traceparent`` and ``baggage``) into the message's
options; on the worker it makes the consumer span of the message's handling,
child of that context, current while the actor runs (an async actor's coroutine
is started from the worker thread, so it inherits the context), with the tool
name and request id the sender put in the baggage (``api.tracing``). Nothing of
the message's arguments is read.

The OpenTelemetry API alone: while tracing is off its spans do not record and
the options stay empty.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import dramatiq
from dramatiq.broker import MessageProxy
from opentelemetry import baggage, context, trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

_tracer = trace.get_tracer("ownsona.tasks")

#: The message option holding the propagated context.
TRACE_OPTION = "otel"
#: Baggage entries copied onto the worker's span (set by api.tracing.tool_span).
_BAGGAGE_ATTRIBUTES = {"ownsona.tool": "ownsona.tool", "ownsona.request_id": "ownsona.request_id"}


class TraceMiddleware(dramatiq.Middleware):
    """Producer spans on send, consumer spans on handling, joined into one trace."""

    def __init__(self) -> None:
        # Spans being handled, by message id: the hooks of one message run on one
        # worker thread, but several threads share this middleware.
        self._running: dict[str, tuple[Span, object]] = {}
        self._lock = threading.Lock()

    @property
    def actor_options(self) -> set[str]:
        return {TRACE_OPTION}

    def before_enqueue(
        self, broker: dramatiq.Broker, message: dramatiq.Message[Any], delay: int
    ) -> None:
        if not trace.get_current_span().is_recording():
            return
        with _tracer.start_as_current_span(
            f"send {message.queue_name}",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "dramatiq",
                "messaging.destination.name": message.queue_name,
                "messaging.message.id": message.message_id,
                "ownsona.actor": message.actor_name,
            },
        ):
            carrier: dict[str, str] = {}
            inject(carrier)
        message.options[TRACE_OPTION] = carrier

    def before_process_message(self, broker: dramatiq.Broker, message: MessageProxy) -> None:
        carrier = message.options.get(TRACE_OPTION)
        parent = extract(carrier) if isinstance(carrier, dict) else None
        span = _tracer.start_span(
            f"process {message.actor_name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "dramatiq",
                "messaging.destination.name": message.queue_name,
                "messaging.message.id": message.message_id,
                "ownsona.actor": message.actor_name,
            },
        )
        for key, attribute in _BAGGAGE_ATTRIBUTES.items():
            value = baggage.get_baggage(key, parent) if parent is not None else None
            if isinstance(value, str):
                span.set_attribute(attribute, value)
        token = context.attach(trace.set_span_in_context(span, parent))
        with self._lock:
            self._running[message.message_id] = (span, token)

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        self._finish(message, result, exception)

    def after_skip_message(self, broker: dramatiq.Broker, message: MessageProxy) -> None:
        self._finish(message, None, None)

    def _finish(self, message: MessageProxy, result: Any, exception: BaseException | None) -> None:
        with self._lock:
            running = self._running.pop(message.message_id, None)
        if running is None:
            return
        span, token = running
        if exception is not None:
            # The type only: an exception's message can quote the values it failed on.
            span.set_attribute("exception.type", type(exception).__name__)
            span.set_status(Status(StatusCode.ERROR))
        elif isinstance(result, dict) and result.get("ok") is False:
            error = result.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if isinstance(code, str):
                span.set_attribute("ownsona.error_code", code)
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        # Attached on this worker thread before the actor ran; nothing else to undo.
        with contextlib.suppress(ValueError):
            context.detach(token)  # type: ignore[arg-type]
