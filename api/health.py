"""``/healthz`` (liveness) and ``/readyz`` (readiness).

``/healthz`` says the process is up and serving HTTP. It touches neither the
database nor Redis, so a slow dependency does not get a healthy web process
restarted.

``/readyz`` says this process can serve tools now: the database answers a
trivial query through the pool, the write queue could queue a write now
(when ``REDIS_URL`` or ``REDIS_SENTINELS`` is set, reported as ``redis``: the
server, or the master the Sentinels name, says ``ROLE`` master; an old
master that came back as a read-only replica answers PING but refuses every
write; ``tasks.redis_probe``: built once and reused, it asks every Sentinel
at once, so one silent Sentinel costs nothing), and the embedder embeds a
short fixed text. The checks run
concurrently, each with its own timeout; the answer is 200 when all pass,
503 otherwise, with each check's outcome and duration. A failure is named
by its exception class only: messages can quote connection strings.

With read replicas (``DATABASE_REPLICA_URLS``) the body also lists each
replica's state and lag as this process's health loop last measured them
(``replicas``). A replica that is down or lagging does not make the process
unready: its reads go to the primary.

A passing embedder check is reused for :data:`EMBEDDER_CHECK_TTL_S`: with a
paid provider, a probe every few seconds must not cost a request each.
Failures are never reused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import falcon
import falcon.asgi
from psycopg_pool import AsyncConnectionPool

from api.runtime import ReplicaStates

#: Seconds each check may take before it counts as failed. The answer comes within the
#: longest of them (the checks run concurrently); a balancer's probe timeout must exceed it.
DATABASE_TIMEOUT_S = 2.0
#: Redis: the probe's own steps are bounded below this (Sentinels 0.4 s, ROLE 0.5 s).
REDIS_TIMEOUT_S = 1.0
EMBEDDER_TIMEOUT_S = 5.0
#: Seconds a passing embedder check stays valid.
EMBEDDER_CHECK_TTL_S = 30.0
#: The text the embedder check embeds.
PROBE_TEXT = "readiness probe"


class Health:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.media = {"status": "ok"}
        resp.set_header("Cache-Control", "no-store")


@runtime_checkable
class QueueReadiness(Protocol):
    """A write queue that can tell whether a write sent now would be queued (on Redis)."""

    async def check_ready(self) -> None:
        """Return when it would; raise (the exception's class is reported) otherwise."""
        ...


def queue_check(queue: object, *, redis_configured: bool) -> QueueCheck | None:
    """The readiness check of ``queue`` when writes go through Redis; None otherwise."""
    if redis_configured and isinstance(queue, QueueReadiness):
        return queue.check_ready
    return None


QueueCheck = Callable[[], Awaitable[None]]


class Ready:
    """``GET /readyz``: database, Redis (when configured) and embedder checks."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        embedder: Any,
        redis_check: QueueCheck | None,
        replicas: ReplicaStates | None = None,
    ) -> None:
        self._pool = pool
        self._embedder = embedder
        self._redis_check = redis_check
        self._replicas = replicas
        self._embedder_ok_until = 0.0

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        checks: dict[str, Callable[[], Awaitable[None]]] = {
            "database": self._database,
            "embedder": self._embedder_check,
        }
        timeouts = {"database": DATABASE_TIMEOUT_S, "embedder": EMBEDDER_TIMEOUT_S}
        if self._redis_check is not None:
            checks["redis"] = self._redis_check
            timeouts["redis"] = REDIS_TIMEOUT_S
        names = sorted(checks)
        outcomes = await asyncio.gather(*(_timed(checks[n], timeouts[n]) for n in names))
        results = dict(zip(names, outcomes, strict=True))
        ready = all(result["ok"] for result in results.values())
        resp.status = 200 if ready else 503
        resp.media = {"status": "ready" if ready else "unavailable", "checks": results}
        if self._replicas is not None:
            resp.media["replicas"] = replica_states(self._replicas)

    async def _database(self) -> None:
        async with self._pool.connection(timeout=DATABASE_TIMEOUT_S) as conn:
            await conn.execute("SELECT 1")

    async def _embedder_check(self) -> None:
        if time.monotonic() < self._embedder_ok_until:
            return
        vector = await self._embedder.embed_one(PROBE_TEXT)
        if vector.shape != (self._embedder.dimensions,):
            raise ValueError("the embedder returned a vector of the wrong width")
        self._embedder_ok_until = time.monotonic() + EMBEDDER_CHECK_TTL_S


# --- read replicas (issue 29) -------------------------------------------------


def replica_states(replicas: ReplicaStates) -> list[dict[str, Any]]:
    """Each replica's name (host:port/db), state (ok, lagging, down, starting) and lag in s."""
    return [
        {"name": r.name, "state": r.state, "lag_s": r.lag_s, "ok": r.state == "ok"}
        for r in replicas.status()
    ]


async def _timed(check: Callable[[], Awaitable[None]], timeout_s: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        await asyncio.wait_for(check(), timeout_s)
    except Exception as ex:
        # The class only: messages of connection errors can quote URLs with passwords.
        error = "Timeout" if isinstance(ex, TimeoutError) else type(ex).__name__
        return {"ok": False, "ms": _ms_since(started), "error": error}
    return {"ok": True, "ms": _ms_since(started)}


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
