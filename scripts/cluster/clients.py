"""The drill's MCP clients: each writes through its web process, reads through the other.

A client is one account with its own token. It remembers unique texts back
to back through its home web process, each write with an ``Idempotency-Key``
and retried with that same key until it is acknowledged (what a careful
client does when a call fails or times out). Each acknowledged write is read
back at once through the OTHER web process (``get_memory``): not found there
is a read-your-writes violation; another text under that id is an id reused.
Every third round it also recalls through the other process, for read latency.
Every HTTP call is logged with its web process, start, duration and outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

#: Seconds between two attempts of one write (or one read-back).
RETRY_PAUSE_S = 0.25
#: Seconds a read-back keeps trying a web process that does not answer (then: unchecked).
READ_BACK_PATIENCE_S = 5.0


@dataclass
class Call:
    web: int
    tool: str
    started: float
    seconds: float
    outcome: str  # "ok" or the error's kind
    #: The error's message, when the server sent one (the drill reports each cause apart).
    message: str = ""


@dataclass
class Ack:
    """An acknowledged write: the id the server answered for this text."""

    user: int
    memory_id: int
    text: str
    web: int
    at: float
    #: When the client first tried this write (``at`` minus this: what its user waited).
    asked_at: float = 0.0


@dataclass
class Log:
    """What every client did during one phase."""

    calls: list[Call] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    ryw_violations: int = 0
    ryw_checked: int = 0
    ryw_unchecked: int = 0  # the other web process never answered in time
    reused_ids: set[int] = field(default_factory=set)  # handed out again for another text
    abandoned_writes: int = 0  # retried until the phase ended, never acknowledged
    #: Texts of writes answered "nothing was stored" (issue 33): written again under a new
    #: key, as a client that believes the answer would; a duplicate then shows it false.
    said_nothing_stored: list[str] = field(default_factory=list)


class Failed(Exception):
    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        #: The error's message, when the server sent one.
        self.message = message


class DrillClient:
    def __init__(
        self,
        n: int,
        token: str,
        urls: list[str],
        *,
        run_id: str,
        timeout_s: float,
        known_ids: dict[int, tuple[int, str]],
    ) -> None:
        self.n = n
        self.home = n % len(urls)
        self.other = (self.home + 1) % len(urls)
        self.run_id = run_id
        self.timeout_s = timeout_s
        self.known_ids = known_ids  # shared by all clients: id -> (user, text) acknowledged
        self.http = [
            httpx.AsyncClient(
                base_url=url,
                headers={"Authorization": f"Bearer {token}"},
                timeout=timeout_s,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            )
            for url in urls
        ]
        self.seq = 0
        self.rpc_id = 0

    async def call(
        self, log: Log, web: int, tool: str, arguments: dict[str, Any], key: str | None = None
    ) -> dict[str, Any]:
        """One ``tools/call``; the payload, or :class:`Failed` with the error's kind."""
        self.rpc_id += 1
        headers = {"Idempotency-Key": key} if key else {}
        started = time.monotonic()
        try:
            payload = await self._post(web, tool, arguments, headers)
        except Failed as ex:
            log.calls.append(
                Call(web, tool, started, time.monotonic() - started, ex.kind, ex.message)
            )
            raise
        log.calls.append(Call(web, tool, started, time.monotonic() - started, "ok"))
        return payload

    async def _post(
        self, web: int, tool: str, arguments: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        try:
            reply = await self.http[web].post(
                "/mcp",
                headers=headers,
                json={
                    "jsonrpc": "2.0",
                    "id": self.rpc_id,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                },
            )
        except httpx.TimeoutException as ex:
            raise Failed("hang") from ex
        except httpx.HTTPError as ex:
            raise Failed(type(ex).__name__) from ex
        if reply.status_code != 200:
            raise Failed(f"HTTP {reply.status_code}")
        body = reply.json()
        if "error" in body:
            raise Failed(f"JSON-RPC {body['error'].get('code')}")
        payload: dict[str, Any] = body["result"]["structuredContent"]
        if not payload.get("ok"):
            error = payload.get("error", {})
            raise Failed(str(error.get("code", "not ok")), str(error.get("message", "")))
        return payload

    async def run(self, log: Log, stop: asyncio.Event, hard_stop: float) -> None:
        """Write, read back, now and then recall, until ``stop``; no call starts after ``hard_stop``."""
        rounds = 0
        while not stop.is_set():
            ack = await self._write(log, hard_stop)
            if ack is None:
                return
            await self._read_back(log, ack, hard_stop)
            rounds += 1
            if rounds % 3 == 0 and time.monotonic() < hard_stop:
                with contextlib.suppress(Failed):
                    await self.call(log, self.other, "recall", {"query": ack.text, "limit": 5})

    async def _write(self, log: Log, hard_stop: float) -> Ack | None:
        self.seq += 1
        marker = f"{self.run_id}c{self.n}w{self.seq}"
        text = f"Drill note {marker}: client {self.n} wrote entry {self.seq} of this run."
        key, tries = marker, 0
        asked_at = time.monotonic()
        while time.monotonic() < hard_stop:
            try:
                payload = await self.call(
                    log, self.home, "remember", {"text": text, "dedup_policy": "insert"}, key
                )
            except Failed as ex:
                if ex.kind in ("INVALID_INPUT", "SECRET_REJECTED", "HTTP 401", "HTTP 403"):
                    raise RuntimeError(f"client {self.n}: remember refused: {ex.kind}") from ex
                if "nothing was stored" in ex.message:
                    # Believed: the next try is a new write (a new key).
                    log.said_nothing_stored.append(text)
                    tries += 1
                    key = f"{marker}n{tries}"
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            ack = Ack(
                self.n, int(payload["memory_id"]), text, self.home, time.monotonic(), asked_at
            )
            earlier = self.known_ids.get(ack.memory_id)
            if earlier is not None and earlier != (self.n, text):
                log.reused_ids.add(ack.memory_id)
            self.known_ids[ack.memory_id] = (self.n, text)
            log.acks.append(ack)
            return ack
        log.abandoned_writes += 1
        return None

    async def _read_back(self, log: Log, ack: Ack, hard_stop: float) -> None:
        # A dead other process must not stop this client writing through its own.
        give_up = min(hard_stop, time.monotonic() + READ_BACK_PATIENCE_S)
        while time.monotonic() < give_up:
            try:
                payload = await self.call(log, self.other, "get_memory", {"id": ack.memory_id})
            except Failed as ex:
                if ex.kind == "NOT_FOUND":
                    log.ryw_checked += 1
                    log.ryw_violations += 1
                    return
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            log.ryw_checked += 1
            if payload["memory"]["text"] != ack.text:
                log.ryw_violations += 1
            return
        log.ryw_unchecked += 1

    async def export(self, log: Log, web: int) -> dict[int, str]:
        """Every memory of this client's account through ``web``: id -> text."""
        payload = await self.call(log, web, "export_memories", {"include_deleted": True})
        return {int(m["id"]): str(m["text"]) for m in payload["memories"]}

    async def close(self) -> None:
        for http in self.http:
            await http.aclose()
