"""``/console/memories/{id}``: one memory, every field, and the forms that change it.

Reads and changes are tool calls (``get_memory``, ``update_memory``,
``confirm``, ``forget``, ``remember``): another user's id is ``NOT_FOUND``
there, so it is 404 here, on every GET and POST alike. The page adds which
app stored it, the relations its text shares with other memories
(``query_relations``), and what replaced it or what it replaced
(``replaced_by_id``). The writer and what it replaced are read from the rows
(``memory.provenance``), not the audit log: the log forgets after its
retention, a memory must not.

There is no tool to restore a forgotten memory: "Remember again" stores its
text, tags and importance as a new memory and says so; the tombstone stays.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

import falcon
import falcon.asgi

from api.console.guard import ConsoleRequest, new_operation_key
from api.console.render import NOTICES
from api.console.services import ConsoleServices
from api.console.tools import CONSOLE_CLIENT_ID, failure
from auth import connected_apps
from memory import graph, provenance
from memory.audit import COMMAND_CLIENT_ID
from memory.errors import MemoryServiceError
from memory.rules.text import normalize_tags
from memory.writers import STDIO_CLIENT_ID

BASE = "/console/memories/"
#: Entities of a memory whose relations the page looks up.
MAX_ENTITIES = 4
#: How the page names a writer that is one of our own entry points.
OWN_WRITERS = {
    CONSOLE_CLIENT_ID: "this console",
    STDIO_CLIENT_ID: "MCP over stdio (ownsona stdio)",
    COMMAND_CLIENT_ID: "an ownsona command (chat import)",
}

NOTICES.update(
    {
        "memory-saved": "Saved.",
        "memory-unchanged": "Nothing changed: the form matched the memory.",
        "memory-confirmed": "Confirmed as still true.",
        "memory-forgotten": "Forgotten: assistants no longer recall it. Its tombstone stays here.",
        "memory-erased": "The memory was erased for good.",
        "memory-remembered-again": (
            "Remembered again as a new memory with the same text, tags and importance "
            "(nothing restores a forgotten one). The forgotten one stays as a tombstone."
        ),
    }
)


@dataclass(frozen=True)
class Writer:
    """Who wrote a memory, as the page shows it."""

    name: str
    #: The OAuth client id, shown beside its name; None for our own apps and CLI tokens.
    client_id: str | None


class MemoryPage:
    """GET the page; POST ``/edit``, ``/confirm``, ``/forget``, ``/remember-again``."""

    def __init__(self, services: ConsoleServices, action: str | None = None) -> None:
        self._s = services
        self._action = action

    async def _memory(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory_id: int
    ) -> dict[str, Any] | None:
        """The user's memory ``memory_id``; None, with the not-found page, when there is none."""
        console: ConsoleRequest = req.context.console
        payload = await self._s.tools.call(console.user_id, "get_memory", {"id": memory_id})
        memory = payload.get("memory") if payload.get("ok") else None
        if not isinstance(memory, dict):
            self._not_found(req, resp)
            return None
        return memory

    def _not_found(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        self._s.renderer.error(req, resp, 404, "Not found", "There is no such memory.")

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory_id: int
    ) -> None:
        if self._action is not None:  # a form's address: its page
            self._s.renderer.redirect(resp, BASE + str(memory_id))
            return
        memory = await self._memory(req, resp, memory_id)
        if memory is not None:
            await self._show(req, resp, memory)

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        memory: dict[str, Any],
        *,
        error: str | None = None,
        status: int = 200,
        draft: dict[str, Any] | None = None,
    ) -> None:
        console: ConsoleRequest = req.context.console
        user_id, memory_id = console.user_id, int(memory["id"])
        origin = await provenance.of_memory(self._s.pool, user_id, memory_id)
        writer = await self._writer(user_id, origin.writer if origin else None)
        own, connected = await self._relations(user_id, memory)
        replaced = origin.replaces if origin else []
        downweighted_by = origin.downweighted_by if origin else []
        downweights = origin.downweights if origin else []
        self._s.renderer.page(
            req,
            resp,
            "memory.html",
            title=f"Memory {memory_id}",
            status=status,
            memory=memory,
            writer=writer,
            own_relations=own,
            connected=connected,
            replaced=replaced,
            downweighted_by=downweighted_by,
            downweights=downweights,
            error=error,
            draft=draft or _draft(memory),
            operation_key=new_operation_key(),
        )

    async def _relations(
        self, user_id: int, memory: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """This memory's relations, and other memories' relations that share an entity.

        No tool looks relations up by memory, so the page asks ``query_relations``
        (one hop) for the entities the rules find in its text, and for the user.
        """
        if memory.get("deleted_at"):
            return [], []  # the graph skips forgotten memories
        entities: list[str] = []
        for relation in graph.extract(str(memory.get("text", ""))):
            for name in (relation.subject, relation.object):
                if name not in entities and name != graph.USER:
                    entities.append(name)
        entities = [*entities[:MAX_ENTITIES], "me"]
        found = await asyncio.gather(
            *(
                self._s.tools.call(user_id, "query_relations", {"entity": e, "max_hops": 1})
                for e in entities
            )
        )
        seen: set[tuple[Any, ...]] = set()
        own: list[dict[str, Any]] = []
        connected: list[dict[str, Any]] = []
        for entity, payload in zip(entities, found, strict=True):
            for edge in payload.get("relations", []) if payload.get("ok") else []:
                mark = (
                    edge["subject"],
                    edge["predicate"],
                    edge["object"],
                    edge["source_memory_id"],
                )
                if mark in seen:
                    continue
                seen.add(mark)
                if edge["source_memory_id"] == memory["id"]:
                    own.append(edge)
                elif entity != "me":  # the user touches nearly every memory: not a link
                    connected.append(edge)
        return own, connected[:50]

    async def _writer(self, user_id: int, written_by: provenance.WrittenBy | None) -> Writer | None:
        """The app recorded on the row, named as the apps page names it; None: not recorded."""
        client_id = written_by.client_id if written_by else None
        if written_by is None or client_id is None:
            return None
        own = OWN_WRITERS.get(client_id)
        if own is not None:
            return Writer(own, None)
        label = await connected_apps.writer_label(
            self._s.pool, user_id, client_id, written_by.token_jti
        )
        if client_id == connected_apps.CLI_CLIENT_ID:
            return Writer(f"CLI token “{label}”" if label else "a CLI token", None)
        name = label or connected_apps.published_from(client_id) or "an unnamed app"
        return Writer(name, client_id)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory_id: int
    ) -> None:
        if self._action is None:
            self._s.renderer.error(req, resp, 405, "Not allowed", "Use the page's forms.")
            return
        memory = await self._memory(req, resp, memory_id)
        if memory is None:
            return
        handler = {
            "edit": self._edit,
            "confirm": self._confirm,
            "forget": self._forget,
            "remember-again": self._remember_again,
        }[self._action]
        await handler(req, resp, memory)

    async def _call(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        memory: dict[str, Any],
        tool: str,
        args: dict[str, Any],
        *,
        draft: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The tool's payload; on failure the page again with its message (nothing changed)."""
        console: ConsoleRequest = req.context.console
        payload = await self._s.tools.call(
            console.user_id, tool, args, key=console.value("operation") or None
        )
        problem = failure(payload)
        if problem is None:
            return payload
        if problem.code == "NOT_FOUND":
            self._not_found(req, resp)
        else:
            await self._show(req, resp, memory, error=problem.message, status=400, draft=draft)
        return None

    async def _edit(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory: dict[str, Any]
    ) -> None:
        console: ConsoleRequest = req.context.console
        draft = {
            "text": console.value("text"),
            "tags": console.value("tags"),
            "importance": console.value("importance"),
            **{name: console.value(name).strip() for name in _TIMES},
            "keep": console.value("keep") == "1",
        }
        if memory.get("deleted_at"):
            message = "This memory is forgotten: remember it again to change it."
            await self._show(req, resp, memory, error=message, status=409, draft=draft)
            return
        try:
            changes = _changes(memory, draft)
        except ValueError as ex:
            await self._show(req, resp, memory, error=str(ex), status=400, draft=draft)
            return
        if not changes:
            self._s.renderer.redirect(resp, BASE + str(memory["id"]), notice="memory-unchanged")
            return
        args = {"id": memory["id"], **changes}
        if await self._call(req, resp, memory, "update_memory", args, draft=draft) is not None:
            self._s.renderer.redirect(resp, BASE + str(memory["id"]), notice="memory-saved")

    async def _confirm(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory: dict[str, Any]
    ) -> None:
        if await self._call(req, resp, memory, "confirm", {"id": memory["id"]}) is not None:
            self._s.renderer.redirect(resp, BASE + str(memory["id"]), notice="memory-confirmed")

    async def _forget(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory: dict[str, Any]
    ) -> None:
        console: ConsoleRequest = req.context.console
        if console.value("hard") == "1":
            if console.value("understood") != "1":
                message = "To erase it for good, tick “I understand this cannot be undone” first."
                await self._show(req, resp, memory, error=message, status=400)
                return
            args: dict[str, Any] = {"id": memory["id"], "hard_delete": True}
            if await self._call(req, resp, memory, "forget", args) is not None:
                self._s.renderer.redirect(resp, "/console/memories", notice="memory-erased")
            return
        reason = console.value("reason").strip()
        args = {"id": memory["id"], **({"reason": reason} if reason else {})}
        if await self._call(req, resp, memory, "forget", args) is not None:
            self._s.renderer.redirect(resp, BASE + str(memory["id"]), notice="memory-forgotten")

    async def _remember_again(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, memory: dict[str, Any]
    ) -> None:
        if not memory.get("deleted_at"):
            self._s.renderer.redirect(resp, BASE + str(memory["id"]))
            return
        args: dict[str, Any] = {"text": memory["text"], "tags": list(memory.get("tags") or [])}
        if memory.get("importance") is not None:
            args["importance"] = memory["importance"]
        payload = await self._call(req, resp, memory, "remember", args)
        if payload is not None:
            target = BASE + str(payload["memory_id"])
            self._s.renderer.redirect(resp, target, notice="memory-remembered-again")


def _draft(memory: dict[str, Any]) -> dict[str, Any]:
    """The edit form's values for a stored memory."""
    importance = memory.get("importance")
    return {
        "text": memory.get("text", ""),
        "tags": ", ".join(memory.get("tags") or []),
        "importance": "" if importance is None else f"{float(importance):g}",
        **{name: _local(memory.get(name)) for name in _TIMES},
        "keep": bool(memory.get("keep")),
    }


#: The timestamps the edit form sets or clears, with how its errors name them: the expiry
#: and the event time (issue 17).
_TIMES = {
    "expires_at": "Expiry",
    "occurred_at": "When it happened",
    "valid_from": "Holds from",
    "valid_to": "Holds until",
}


def _local(stamp: Any) -> str:
    """An RFC 3339 UTC timestamp as a ``datetime-local`` value (to the minute)."""
    return stamp[:16] if isinstance(stamp, str) and len(stamp) >= 16 else ""


def _changes(memory: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
    """The fields the form changes (only those: a kept memory accepts ``keep`` alone)."""
    out: dict[str, Any] = {}
    text = str(draft["text"]).strip()
    if text != str(memory.get("text", "")).strip():
        out["text"] = text
    typed = [t.strip() for t in str(draft["tags"]).split(",") if t.strip()]
    try:
        normal = normalize_tags(typed)
    except MemoryServiceError as ex:
        raise ValueError(str(ex)) from None
    if normal != list(memory.get("tags") or []):
        out["tags"] = typed
    raw = str(draft["importance"]).strip()
    if raw:
        try:
            importance = float(raw)
        except ValueError:
            raise ValueError("Importance must be a number from 0 to 1.") from None
        if not math.isfinite(importance):
            raise ValueError("Importance must be a number from 0 to 1.")
        current = memory.get("importance")
        if current is None or abs(float(current) - importance) > 1e-9:
            out["importance"] = importance
    for name, label in _TIMES.items():
        value = str(draft[name])
        if value != _local(memory.get(name)):
            if value and (len(value) != 16 or value[10] != "T"):
                raise ValueError(f"{label} must be a date and time (YYYY-MM-DDTHH:MM, UTC).")
            # Empty clears it (update_memory's null); the tool checks the rest.
            out[name] = f"{value}:00Z" if value else None
    if bool(draft["keep"]) != bool(memory.get("keep")):
        out["keep"] = bool(draft["keep"])
    return out


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    path = "/console/memories/{memory_id:int}"
    return [
        (path, MemoryPage(services)),
        *(
            (f"{path}/{action}", MemoryPage(services, action))
            for action in ("edit", "confirm", "forget", "remember-again")
        ),
    ]
