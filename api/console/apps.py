"""``/console/apps``: the apps connected to the owner's memory, and disconnecting one.

An app is an OAuth grant (an assistant allowed on the consent page) or a CLI
token (``ownsona token``). Each shows what it may do (scopes), when it was
first and last used (the grant's or token's own record, and the audit log's
last call) and how many memories it wrote: the rows that name it as their
writer (``memory.provenance``; the audit log forgets after its retention, the
rows do not), forgotten ones included (forgetting one later does not unwrite
it; only erased rows are gone), with how many of them are still active.
"Disconnect" ends the grant (its refresh tokens and access tokens) or
deny-lists the token: the app's next request is refused. The same Disconnect
form sent twice (its operation key) answers as the first did. Another
account's grant or token is a 404, exactly like one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import falcon.asgi

from api.console.guard import ConsoleRequest, new_operation_key
from api.console.render import NOTICES
from api.console.services import ConsoleServices
from auth import connected_apps
from memory import audit, provenance

NOTICES.update(
    {
        "app-disconnected": "The app is disconnected: its next request will be refused.",
        "token-disconnected": "The CLI token is revoked: its next request will be refused.",
    }
)

_GONE = "There is no such connected app on your account. It may have been disconnected already."


@dataclass(frozen=True)
class Usage:
    """What the audit log (calls) and the memories themselves (written) say of one app."""

    last_call: datetime | None = None
    calls: int = 0
    memories_written: int = 0
    #: Of those, the ones still active (not forgotten, not expired).
    memories_active: int = 0


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
        calls = {
            (a.client_id, a.token_jti): a
            for a in await audit.app_activity(self._s.pool, console.user_id)
        }
        written = {
            (w.client_id, w.token_jti): w
            for w in await provenance.written_counts(self._s.pool, console.user_id)
        }

        def usage(key: tuple[str, str | None]) -> Usage:
            call, wrote = calls.get(key), written.get(key)
            return Usage(
                last_call=call.last_at if call else None,
                calls=call.calls if call else 0,
                memories_written=wrote.total if wrote else 0,
                memories_active=wrote.active if wrote else 0,
            )

        grants = [(g, usage((g.grant.client_id, None))) for g in apps.grants]
        tokens = [(t, usage((connected_apps.CLI_CLIENT_ID, t.jti))) for t in apps.cli_tokens]
        self._s.renderer.page(
            req,
            resp,
            "apps.html",
            title="Apps",
            grants=grants,
            tokens=tokens,
            latest=latest,
            operation_key=new_operation_key(),
        )


class DisconnectGrant:
    def __init__(self, services: ConsoleServices) -> None:
        self._s = services

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, grant_id: int
    ) -> None:
        console: ConsoleRequest = req.context.console
        done = await connected_apps.disconnect_grant(
            self._s.pool, console.user_id, grant_id, operation=console.value("operation") or None
        )
        if not done:
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
        done = await connected_apps.disconnect_cli_token(
            self._s.pool, console.user_id, token_id, operation=console.value("operation") or None
        )
        if not done:
            self._s.renderer.error(req, resp, 404, "No such token", _GONE)
            return
        self._s.renderer.redirect(resp, "/console/apps", notice="token-disconnected")


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return [
        ("/console/apps", AppsPage(services)),
        ("/console/apps/grants/{grant_id:int}/disconnect", DisconnectGrant(services)),
        ("/console/apps/tokens/{token_id:int}/disconnect", DisconnectToken(services)),
    ]
