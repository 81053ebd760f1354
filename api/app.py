"""The composition root of the web process: ``create_app(settings)``.

Tests pass a ready :class:`~api.runtime.Runtime` (and, if they like, their
own use cases); production builds the runtime on ASGI lifespan startup with
``api.lifecycle.build_runtime`` and closes it on shutdown, so nothing
connects at import time (STYLE §3.5).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import falcon
import falcon.asgi

from api.health import Health, Ready
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
from api.runtime import Runtime
from api.wellknown import AuthorizationServerMetadata, Jwks, ProtectedResourceMetadata
from auth.oauth_errors import OAuthError
from config.settings import Settings
from memory.service import USE_CASES, UseCase

BuildRuntime = Callable[[Settings], Awaitable[Runtime]]
CloseRuntime = Callable[[Runtime], Awaitable[None]]

MCP_PATH = "/mcp"


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    build_runtime: BuildRuntime | None = None,
    close_runtime: CloseRuntime | None = None,
    use_cases: Mapping[str, UseCase] | None = None,
    oauth_options: OAuthOptions | None = None,
) -> falcon.asgi.App:
    """Routes, middleware and error handling around one runtime.

    With ``runtime`` the caller owns it: it is used as is and never closed.
    Without, it is built on startup by ``build_runtime`` (default
    ``api.lifecycle.build_runtime``) and closed on shutdown by
    ``close_runtime`` (default ``api.lifecycle.close_runtime``).
    ``oauth_options`` changes the sign-in throttle and session lifetime (tests).
    """
    lifecycle = _Lifecycle(settings, runtime, build_runtime, close_runtime)
    origins = OriginPolicy(settings)
    # Nothing is measured unless metrics are on (METRICS_ENABLED).
    metrics = Metrics() if settings.metrics_enabled else None
    app = falcon.asgi.App(
        middleware=[
            lifecycle,
            *([MetricsWiring(metrics, lifecycle.current)] if metrics is not None else []),
            # First of the request hooks: every answer, refusals included, gets its id and log line.
            RequestLog(metrics.request_answered if metrics is not None else None),
            _BodyCap(settings.max_body_bytes),
            McpCors(origins, MCP_PATH),
            OAuthCors(),
        ]
    )
    # "/mcp/" is a common client-side slip; serve it rather than 404.
    app.req_options.strip_url_path_trailing_slash = True

    dispatcher = McpDispatcher(
        tool_specs(settings),
        USE_CASES if use_cases is None else use_cases,
        lifecycle.required,
        observer=metrics,
    )
    app.add_route(
        MCP_PATH,
        McpResource(
            dispatcher,
            lifecycle.current,
            origins,
            max_body_bytes=settings.max_body_bytes,
            max_batch=settings.max_batch_size,
        ),
    )
    metadata = ProtectedResourceMetadata(settings)
    app.add_route("/.well-known/oauth-protected-resource", metadata)
    app.add_route(f"/.well-known/oauth-protected-resource{MCP_PATH}", metadata)
    app.add_route("/oauth/jwks", Jwks(lifecycle.current))
    app.add_route("/.well-known/oauth-authorization-server", AuthorizationServerMetadata(settings))
    services = OAuthServices(lifecycle.current, settings, oauth_options or OAuthOptions())
    app.add_route("/oauth/register", Registration(services))
    app.add_route("/oauth/authorize", Authorize(services))
    app.add_route("/oauth/token", Token(services))
    app.add_route("/oauth/revoke", Revocation(services))
    app.add_error_handler(OAuthError, handle_oauth_error)
    app.add_route("/healthz", Health())
    app.add_route("/readyz", Ready(lifecycle.current))
    app.add_route("/metrics", MetricsResource(settings, metrics, lifecycle.current))
    return app


class _Lifecycle:
    """Falcon lifespan middleware that owns the runtime when the caller did not pass one."""

    def __init__(
        self,
        settings: Settings,
        runtime: Runtime | None,
        build: BuildRuntime | None,
        close: CloseRuntime | None,
    ) -> None:
        self._settings = settings
        self._runtime = runtime
        self._owned = runtime is None
        self._build = build
        self._close = close

    def current(self) -> Runtime | None:
        return self._runtime

    def required(self) -> Runtime:
        if self._runtime is None:
            raise RuntimeError("the runtime is not built yet")
        return self._runtime

    async def process_startup(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        if not self._owned or self._runtime is not None:
            return
        if self._build is not None:
            self._runtime = await self._build(self._settings)
        else:
            # Imported here, so that importing api needs none of the lifecycle's dependencies.
            from api.lifecycle import build_runtime

            self._runtime = await build_runtime(self._settings)

    async def process_shutdown(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        if not self._owned or self._runtime is None:
            return
        runtime, self._runtime = self._runtime, None
        if self._close is not None:
            await self._close(runtime)
        else:
            from api.lifecycle import close_runtime

            await close_runtime(runtime)


class _BodyCap:
    """Refuse a declared body over the cap before any responder reads it.

    /mcp enforces the cap itself, while reading (it must answer in JSON-RPC
    and also cover bodies without Content-Length).
    """

    def __init__(self, max_body_bytes: int) -> None:
        self._max = max_body_bytes

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if req.path.rstrip("/") == MCP_PATH:
            return
        length = req.content_length
        if length is not None and length > self._max:
            raise falcon.HTTPContentTooLarge(description=f"The body exceeds {self._max} bytes.")
