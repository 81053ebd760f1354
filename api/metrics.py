"""Prometheus metrics of one web process, served at ``/metrics`` when enabled.

Off by default (``METRICS_ENABLED``): /metrics answers 404, and nothing is
measured. With ``METRICS_TOKEN`` set, a scrape needs ``Authorization: Bearer
<token>`` (401 otherwise).

What is measured, and where it comes from:

- ``ownsona_tool_duration_seconds{tool}``, ``ownsona_tool_errors_total{tool,code}``
  and ``ownsona_write_wait_seconds{tool}``: the MCP dispatcher reports each
  tool call (``api.mcp.dispatch.ToolObserver``).
- ``ownsona_embed_duration_seconds{provider}``, ``ownsona_embed_batch_size{provider}``
  and ``ownsona_embed_errors_total{provider}``: the embedder reports each
  provider call (``memory.providers.embedders.EmbedObserver``). In the embedded default
  the in-process worker shares the embedder, so writes count too.
- ``ownsona_http_requests_total{method,route,status}``: the request-log
  middleware (``api.logs.RequestLog``).
- ``ownsona_replica_up{replica}``, ``ownsona_replica_lag_seconds{replica}`` and
  ``ownsona_replica_reads{replica}`` (``primary`` counts the reads no replica
  could serve): the read replicas as this process's health loop last saw them.
- ``ownsona_queue_depth{queue}`` and ``ownsona_db_pool_*{pool}``: read at
  scrape time from Redis (or the in-process queue) and from psycopg_pool's
  ``get_stats()``.

Each process has its own registry: with several uvicorn workers a scrape
sees the process that answered it. Dramatiq workers serve no HTTP; their
work shows as write wait and queue depth here.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any, Protocol, runtime_checkable

import falcon
import falcon.asgi
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from psycopg_pool import AsyncConnectionPool

from api.mcp.admission import Admission
from api.runtime import ReplicaStates
from config.settings import Settings

_log = logging.getLogger(__name__)

#: Tool latency buckets, in seconds: inline reads are milliseconds, queued scans can take a minute.
TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Embedding latency buckets, in seconds.
EMBED_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Texts per provider call (MAX_BATCH_SIZE is 200 by default).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 200, 256, 512, 1024)
#: Longest a scrape waits for Redis to report the queue depths, in seconds.
QUEUE_READ_TIMEOUT_S = 2.0


@runtime_checkable
class QueueDepths(Protocol):
    """A write queue that can report its backlog (``tasks.queue.DramatiqWriteQueue``)."""

    async def queue_depths(self) -> dict[str, int]: ...


class Metrics:
    """The collectors of one app, on a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.tool_duration = Histogram(
            "ownsona_tool_duration_seconds", "MCP tool call latency.", ["tool"],
            buckets=TOOL_BUCKETS, registry=r,
        )  # fmt: skip
        self.tool_errors = Counter(
            "ownsona_tool_errors", "MCP tool calls that failed, by error code.", ["tool", "code"],
            registry=r,
        )  # fmt: skip
        self.write_wait = Histogram(
            "ownsona_write_wait_seconds", "Time a tool waited for its queued write.", ["tool"],
            buckets=TOOL_BUCKETS, registry=r,
        )  # fmt: skip
        self.embed_duration = Histogram(
            "ownsona_embed_duration_seconds", "Embedding provider call latency.", ["provider"],
            buckets=EMBED_BUCKETS, registry=r,
        )  # fmt: skip
        self.embed_batch = Histogram(
            "ownsona_embed_batch_size", "Texts per embedding provider call.", ["provider"],
            buckets=BATCH_BUCKETS, registry=r,
        )  # fmt: skip
        self.embed_errors = Counter(
            "ownsona_embed_errors", "Embedding provider calls that failed.", ["provider"],
            registry=r,
        )  # fmt: skip
        self.rerank_duration = Histogram(
            "ownsona_rerank_duration_seconds", "Reranker (RERANK_PROVIDER) call latency.",
            buckets=EMBED_BUCKETS, registry=r,
        )  # fmt: skip
        self.rerank_errors = Counter(
            "ownsona_rerank_errors",
            "Reranker calls that failed (recall then used its first ranking).", registry=r,
        )  # fmt: skip
        self.http_requests = Counter(
            "ownsona_http_requests", "HTTP requests answered.", ["method", "route", "status"],
            registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge(
            "ownsona_queue_depth",
            "Messages enqueued and not yet acknowledged, per queue (read at scrape time).",
            ["queue"], registry=r,
        )  # fmt: skip
        self.pool_size = Gauge(
            "ownsona_db_pool_size", "Open database connections.", ["pool"], registry=r
        )
        self.pool_available = Gauge(
            "ownsona_db_pool_available", "Idle database connections.", ["pool"], registry=r
        )
        self.pool_waiting = Gauge(
            "ownsona_db_pool_waiting", "Requests waiting for a connection.", ["pool"], registry=r
        )
        self.pool_max = Gauge(
            "ownsona_db_pool_max", "Most connections the pool may open.", ["pool"], registry=r
        )
        self.replica_up = Gauge(
            "ownsona_replica_up",
            "1 when the read replica serves reads (healthy, within REPLICA_MAX_LAG_S).",
            ["replica"], registry=r,
        )  # fmt: skip
        self.replica_lag = Gauge(
            "ownsona_replica_lag_seconds",
            "How far the read replica's replay is behind the primary (-1: not measured).",
            ["replica"], registry=r,
        )  # fmt: skip
        self.replica_reads = Gauge(
            "ownsona_replica_reads",
            "Reads served by each replica since the process started ('primary': no replica could).",
            ["replica"], registry=r,
        )  # fmt: skip
        self.queries_waiting = Gauge(
            "ownsona_queries_waiting",
            "recall/search_memory/build_context_prompt calls held back while lighter reads run "
            "(BUSY_RECALL_LIMIT).",
            registry=r,
        )

    # --- observers: called on the hot paths, so cheap and never raising ----------

    def tool_called(self, tool: str, seconds: float, error_code: str | None) -> None:
        self.tool_duration.labels(tool).observe(seconds)
        if error_code is not None:
            self.tool_errors.labels(tool, error_code).inc()

    def write_waited(self, tool: str, seconds: float) -> None:
        self.write_wait.labels(tool).observe(seconds)

    def embedded(self, provider: str, batch_size: int, seconds: float, ok: bool) -> None:
        self.embed_duration.labels(provider).observe(seconds)
        self.embed_batch.labels(provider).observe(batch_size)
        if not ok:
            self.embed_errors.labels(provider).inc()

    def reranked(self, seconds: float, ok: bool) -> None:
        self.rerank_duration.observe(seconds)
        if not ok:
            self.rerank_errors.inc()

    def request_answered(self, method: str, route: str, status: int, seconds: float) -> None:
        self.http_requests.labels(method, route, str(status)).inc()

    # --- scrape time -----------------------------------------------------------

    def replicas_seen(self, replicas: ReplicaStates) -> None:
        for status in replicas.status():
            self.replica_up.labels(status.name).set(1 if status.state == "ok" else 0)
            self.replica_lag.labels(status.name).set(-1 if status.lag_s is None else status.lag_s)
            self.replica_reads.labels(status.name).set(status.reads)
        self.replica_reads.labels("primary").set(getattr(replicas, "primary_reads", 0))

    async def refresh(
        self,
        pool: AsyncConnectionPool,
        queue: Any,
        admission: Admission | None = None,
        replicas: ReplicaStates | None = None,
    ) -> None:
        """Read the values that are only worth reading when someone looks."""
        if replicas is not None:
            self.replicas_seen(replicas)
        if admission is not None:
            self.queries_waiting.set(admission.waiting)
        stats = pool.get_stats()
        name = pool.name
        self.pool_size.labels(name).set(stats.get("pool_size", 0))
        self.pool_available.labels(name).set(stats.get("pool_available", 0))
        self.pool_waiting.labels(name).set(stats.get("requests_waiting", 0))
        self.pool_max.labels(name).set(stats.get("pool_max", 0))
        if isinstance(queue, QueueDepths):
            try:
                depths = await asyncio.wait_for(queue.queue_depths(), QUEUE_READ_TIMEOUT_S)
            except Exception as ex:  # a scrape must still answer; the gauge keeps its last value
                _log.warning("could not read the queue depths: %s", type(ex).__name__)
            else:
                for queue_name, depth in depths.items():
                    self.queue_depth.labels(queue_name).set(depth)

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The page and its content type, in the format the scraper's Accept asks for."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


class MetricsWiring:
    """Falcon lifespan middleware: watch the embedder and the reranker while the app runs."""

    def __init__(self, metrics: Metrics, embedder: Any, reranker: Any = None) -> None:
        self._metrics = metrics
        self._embedder = embedder
        self._reranker = reranker
        self._watched = False

    async def process_startup(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        if self._embedder is not None and hasattr(self._embedder, "add_observer"):
            self._embedder.add_observer(self._metrics.embedded)
            self._watched = True
        if self._reranker is not None and hasattr(self._reranker, "add_observer"):
            self._reranker.add_observer(self._metrics.reranked)

    async def process_shutdown(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        # A test's embedder outlives its app: leave it as it was found.
        if self._watched:
            self._embedder.remove_observer(self._metrics.embedded)
            self._watched = False
        if self._reranker is not None and hasattr(self._reranker, "remove_observer"):
            self._reranker.remove_observer(self._metrics.reranked)


class MetricsResource:
    """``GET /metrics``: the Prometheus text format, when enabled and authorised."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics | None,
        pool: AsyncConnectionPool,
        write_queue: Any,
        admission: Admission | None = None,
        replicas: ReplicaStates | None = None,
    ) -> None:
        self._token = settings.metrics_token
        self._replicas = replicas
        self._metrics = metrics
        self._pool = pool
        self._write_queue = write_queue
        self._admission = admission

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if self._metrics is None:
            raise falcon.HTTPNotFound()
        if self._token is not None and not _bearer_matches(
            req.get_header("Authorization"), self._token
        ):
            raise falcon.HTTPUnauthorized(
                title="Unauthorized",
                description="Send Authorization: Bearer <METRICS_TOKEN>.",
                challenges=['Bearer realm="metrics"'],
            )
        await self._metrics.refresh(self._pool, self._write_queue, self._admission, self._replicas)
        resp.data, resp.content_type = self._metrics.render(req.get_header("Accept"))
        resp.set_header("Cache-Control", "no-store")


def _bearer_matches(header: str | None, token: str) -> bool:
    if header is None:
        return False
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())
