"""``/console/apps``: the apps connected to the owner's memory, and disconnecting one.

An app is an OAuth grant (an assistant allowed on the consent page) or a CLI
token (``ownsona token``). Each shows what it may do (scopes), when it was
first and last used (the grant's or token's own record, and the audit log's
last call) and how many memories it wrote. "Disconnect" ends the grant (its
refresh tokens and access tokens) or deny-lists the token: the app's next
request is refused. Another account's grant or token is a 404, exactly like
one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import falcon.asgi

from api.console.guard import ConsoleRequest
from api.console.render import NOTICES
from api.console.services import ConsoleServices
from auth import connected_apps
from memory import audit

NOTICES.update(
    {
        "app-disconnected": "The app is disconnected: its next request will be refused.",
        "token-disconnected": "The CLI token is revoked: its next request will be refused.",
    }
)

_GONE = "There is no such connected app on your account. It may have been disconnected already."


@dataclass(frozen=True)
class Usage:
    """What the audit log says of one app."""

    last_call: datetime | None = None
    calls: int = 0
    memories_written: int = 0


def latest(*values: datetime | None) -> datetime | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


class AppsPage:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        console: ConsoleRequest = req.context.console
        if self._s.runtime.audit is not None:
            await self._s.runtime.audit.catch_up()
        apps = await connected_apps.connected_apps(self._s.pool, console.user_id)
        usage: dict[tuple[str | None, str | None], Usage] = {
            (a.client_id, a.token_jti): Usage(a.last_at, a.calls, a.memories_written)
            for a in await audit.app_activity(self._s.pool, console.user_id)
        }
        grants = [(g, usage.get((g.grant.client_id, None), Usage())) for g in apps.grants]
        tokens = [
            (t, usage.get((connected_apps.CLI_CLIENT_ID, t.jti), Usage())) for t in apps.cli_tokens
        ]
        self._s.renderer.page(
            req, resp, "apps.html", title="Apps", grants=grants, tokens=tokens, latest=latest
        )


class DisconnectGrant:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, grant_id: int
    ) -> None:
        console: ConsoleRequest = req.context.console
        if not await connected_apps.disconnect_grant(self._s.pool, console.user_id, grant_id):
            self._s.renderer.error(req, resp, 404, "No such app", _GONE)
            return
        self._s.renderer.redirect(resp, "/console/apps", notice="app-disconnected")


class DisconnectToken:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, token_id: int
    ) -> None:
        console: ConsoleRequest = req.context.console
        if not await connected_apps.disconnect_cli_token(self._s.pool, console.user_id, token_id):
            self._s.renderer.error(req, resp, 404, "No such token", _GONE)
            return
        self._s.renderer.redirect(resp, "/console/apps", notice="token-disconnected")


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [
        ("/console/apps", AppsPage(services)),
        ("/console/apps/grants/{grant_id:int}/disconnect", DisconnectGrant(services)),
        ("/console/apps/tokens/{token_id:int}/disconnect", DisconnectToken(services)),
    ]
