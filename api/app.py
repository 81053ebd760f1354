"""The web app: ``create_app(settings, runtime=...)`` (Falcon asgilook style).

The caller builds the collaborators (``bootstrap.web`` for the server,
fixtures for tests) and passes them in; every resource gets what it needs
through its constructor. With ``lifespan`` (``bootstrap.web.WebProcess``)
the app opens them on ASGI lifespan startup and closes them on shutdown;
without, they are the caller's to open and close. Nothing connects here
(STYLE §3.5).
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from api.console.guard import UPLOAD_PATHS, ConsoleGuard
from api.console.jobs import Jobs
from api.console.render import Renderer
from api.console.routes import add_routes as add_console_routes
from api.console.services import ConsoleServices
from api.console.tools import ConsoleTools
from api.health import Health, Ready, queue_check
from api.logs import RequestLog
from api.mcp.dispatch import McpDispatcher
from api.mcp.resource import McpResource
from api.mcp.tools import tool_specs
from api.metrics import Metrics, MetricsResource, MetricsWiring
from api.oauth import (
    Authorize,
    OAuthCors,
    OAuthOptions,
    OAuthServices,
    Registration,
    Revocation,
    Token,
    handle_oauth_error,
)
from api.origins import McpCors, OriginPolicy
from api.runtime import Lifespan, Runtime
from api.tracing import RequestTracing
from api.wellknown import AuthorizationServerMetadata, Jwks, ProtectedResourceMetadata
from auth.mcp_sessions import SessionBook
from auth.oauth_errors import OAuthError
from config.settings import Settings
from memory.audit import AuditLog

MCP_PATH = "/mcp"


def create_app(
    settings: Settings, *, runtime: Runtime, lifespan: Lifespan | None = None
) -> falcon.asgi.App[falcon.asgi.Request, falcon.asgi.Response]:
    """Routes, middleware and error handling around ``runtime``'s collaborators.

    ``lifespan`` opens them on startup and closes them on shutdown; without
    it the caller owns them and they are never closed here. Every seam a
    test replaces is a collaborator of ``runtime`` (``bootstrap.web`` builds
    the real one), never a parameter here.
    """
    origins = OriginPolicy(settings)
    # Nothing is measured unless metrics are on (METRICS_ENABLED).
    metrics = Metrics() if settings.metrics_enabled else None
    deps = runtime.deps
    services = OAuthServices(
        deps.pool,
        runtime.keystore,
        settings,
        runtime.oauth_options or OAuthOptions(),
        fetcher=runtime.metadata_fetcher,
    )
    renderer = Renderer(settings.public_url)
    owns_jobs = runtime.console_jobs is None
    jobs = Jobs(deps.pool) if runtime.console_jobs is None else runtime.console_jobs
    app = falcon.asgi.App(
        middleware=_middleware(settings, runtime, lifespan, metrics, services, renderer, origins)
        # Shutdown hooks run in reverse: the console's jobs stop (and record it) before
        # the lifespan closes the pool.
        + ([_StopJobs(jobs)] if lifespan is not None and owns_jobs else [])
    )
    # "/mcp/" is a common client-side slip; serve it rather than 404.
    app.req_options.strip_url_path_trailing_slash = True
    if runtime.audit is None:
        # No process owns this app's lifetime (tests): no background writer to outlive it.
        runtime.audit = AuditLog(deps.pool, settings, background=False, keyring=deps.keyring)
    dispatcher = McpDispatcher(
        tool_specs(settings),
        runtime.run_inline,
        deps=deps,
        write_queue=runtime.write_queue,
        observer=metrics,
        audit=runtime.audit,
    )
    _add_mcp_routes(app, settings, runtime, dispatcher, origins)
    _add_oauth_routes(app, settings, runtime, services)
    app.add_route("/healthz", Health())
    app.add_route(
        "/readyz",
        Ready(
            deps.pool,
            deps.embedder,
            queue_check(runtime.write_queue, redis_configured=settings.redis_configured),
            runtime.replicas,
        ),
    )
    app.add_route(
        "/metrics",
        MetricsResource(
            settings, metrics, deps.pool, runtime.write_queue, dispatcher.admission,
            runtime.replicas,
        ),
    )  # fmt: skip
    add_console_routes(
        app,
        ConsoleServices(
            settings=settings,
            runtime=runtime,
            pool=deps.pool,
            renderer=renderer,
            tools=ConsoleTools(dispatcher),
            sessions=services.sessions,
            login_guard=services.guard,
            jobs=jobs,
        ),
    )
    return app


def _middleware(
    settings: Settings,
    runtime: Runtime,
    lifespan: Lifespan | None,
    metrics: Metrics | None,
    services: OAuthServices,
    renderer: Renderer,
    origins: OriginPolicy,
) -> list[Any]:
    deps = runtime.deps
    return [
        # First: the collaborators are open before any other startup hook runs.
        *([_Lifespan(lifespan)] if lifespan is not None else []),
        *(
            [
                MetricsWiring(
                    metrics,
                    deps.embedder,
                    deps.reranker.reranker if deps.reranker is not None else None,
                )
            ]
            if metrics is not None
            else []
        ),
        # First of the request hooks: every answer, refusals included, gets its id and log line.
        RequestLog(metrics.request_answered if metrics is not None else None),
        # Right after it, so the request's span carries its id (OTEL_EXPORTER_OTLP_ENDPOINT).
        *([RequestTracing()] if settings.trace_endpoint else []),
        _BodyCap(settings.max_body_bytes, settings.console_upload_max_bytes),
        McpCors(origins, MCP_PATH),
        OAuthCors(),
        ConsoleGuard(
            services.sessions,
            renderer,
            public_url=settings.public_url,
            secure_cookies=settings.secure_cookies,
            max_upload_bytes=settings.console_upload_max_bytes,
        ),
    ]


def _add_mcp_routes(
    app: falcon.asgi.App[Any, Any],
    settings: Settings,
    runtime: Runtime,
    dispatcher: McpDispatcher,
    origins: OriginPolicy,
) -> None:
    app.add_route(
        MCP_PATH,
        McpResource(
            dispatcher,
            origins,
            settings=runtime.settings,
            bearer=runtime.bearer,
            keystore=runtime.keystore,
            pool=runtime.deps.pool,
            sessions=SessionBook(),
            max_body_bytes=settings.max_body_bytes,
            max_batch=settings.max_batch_size,
        ),
    )
    metadata = ProtectedResourceMetadata(settings)
    app.add_route("/.well-known/oauth-protected-resource", metadata)
    app.add_route(f"/.well-known/oauth-protected-resource{MCP_PATH}", metadata)


def _add_oauth_routes(
    app: falcon.asgi.App[Any, Any], settings: Settings, runtime: Runtime, services: OAuthServices
) -> None:
    app.add_route("/oauth/jwks", Jwks(runtime.keystore))
    app.add_route("/.well-known/oauth-authorization-server", AuthorizationServerMetadata(settings))
    app.add_route("/oauth/register", Registration(services))
    app.add_route("/oauth/authorize", Authorize(services))
    app.add_route("/oauth/token", Token(services))
    app.add_route("/oauth/revoke", Revocation(services))
    app.add_error_handler(OAuthError, handle_oauth_error)


class _Lifespan:
    """Falcon lifespan middleware: open the collaborators on startup, close them on shutdown."""

    def __init__(self, lifespan: Lifespan) -> None:
        self._lifespan = lifespan

    async def process_startup(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        await self._lifespan.open()

    async def process_shutdown(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        await self._lifespan.close()


class _StopJobs:
    """Stop the console's background jobs on shutdown; each records that it was stopped."""

    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs

    async def process_shutdown(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        await self._jobs.close()


class _BodyCap:
    """Refuse a declared body over the cap before any responder reads it.

    /mcp enforces the cap itself, while reading (it must answer in JSON-RPC
    and also cover bodies without Content-Length). The console's two upload routes
    take bodies up to their own cap, which its guard enforces again while reading.
    """

    def __init__(self, max_body_bytes: int, max_upload_bytes: int) -> None:
        self._max = max_body_bytes
        self._max_upload = max_upload_bytes

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if req.path.rstrip("/") == MCP_PATH:
            return
        cap = self._max_upload if req.path in UPLOAD_PATHS else self._max
        length = req.content_length
        if length is not None and length > cap:
            raise falcon.HTTPContentTooLarge(description=f"The body exceeds {cap} bytes.")
