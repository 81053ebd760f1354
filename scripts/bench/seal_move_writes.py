"""The writes ``seal_move`` keeps sending while ``ownsona seal`` runs, and the check of them.

One thread, one MCP client per seeded user, calls back to back over HTTP: new
memories (``remember``, ``remember_batch`` of 5), edits of a seeded row's text or
tags (``update_memory``) and ``forget`` of a seeded row, each seeded row changed
at most once. Every acknowledged write updates what the final export must show;
a call that fails is counted and its row left out of the comparison (its fate is
unknown to the client, which is not "lost").
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import httpx

from . import corpus
from .core import Server
from .mcp_client import McpClient
from .seal_move_store import Seeded

#: The mix of writes (weights).
_MIX = {"remember": 40, "remember_batch": 15, "update_text": 20, "update_tags": 10, "forget": 15}
#: Fields of an export record a write sets, compared for every row; edges only for
#: seeded rows no write touched (an edit of the text extracts them again).
_FIELDS = ("user", "text", "tags", "metadata", "deleted", "forget_reason")


class Writes:
    """The writer thread and what it expects the store to hold afterwards."""

    def __init__(self, server: Server, seeded: Seeded, before: dict[int, dict[str, Any]]) -> None:
        self.clients = {
            name: McpClient(server.url, server.token(name), timeout_s=600) for name in seeded.users
        }
        self.rng = random.Random(5)
        self.expected = {i: dict(r) for i, r in before.items()}
        self.before = before
        self.touched: set[int] = set()
        self.uncertain: set[int] = set()
        self.done: Counter[str] = Counter()
        self.failures: list[str] = []
        self.seeded = seeded
        self.free = {name: [] for name in seeded.users}  # type: dict[str, list[int]]
        marked = {i for _, i in seeded.marker_rows.values()}
        for memory_id, record in sorted(before.items()):
            if not record["deleted"] and memory_id not in marked:
                self.free[record["user"]].append(memory_id)
        for ids in self.free.values():
            self.rng.shuffle(ids)
        self.texts = corpus.facts(10**7, seed=41)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="seal-move-writes")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for client in self.clients.values():
            client.close()

    def counts(self) -> dict[str, Any]:
        return {
            **dict(self.done),
            "acknowledged": sum(self.done.values()),
            "failed_calls": len(self.failures),
            "failures": self.failures[:5],
        }

    # --- writing ---------------------------------------------------------------------

    def _loop(self) -> None:
        # First, the marker row the move reaches last: a plain row edited by a sealing
        # server (its marker tag must end up sealed, its new text readable).
        user, memory_id = self.seeded.marker_rows["updated_mid_move"]
        self._update_text(user, memory_id)
        names = list(self.clients)
        while not self._stop.is_set():
            kind = self.rng.choices(list(_MIX), weights=list(_MIX.values()))[0]
            user = self.rng.choice(names)
            if kind == "remember":
                self._remember(user, 1)
            elif kind == "remember_batch":
                self._remember(user, 5)
            elif self.free[user]:
                memory_id = self.free[user].pop()
                if kind == "update_text":
                    self._update_text(user, memory_id)
                elif kind == "update_tags":
                    self._update_tags(user, memory_id)
                else:
                    self._forget(user, memory_id)

    def _call(self, user: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.clients[user].call(tool, arguments)
        except (SystemExit, httpx.HTTPError) as ex:  # McpClient ends a bench on failure
            self.failures.append(f"{tool}: {ex}"[:300])
            return None

    def _new_text(self) -> str:
        return f"Written while sealing: {next(self.texts)}"

    def _remember(self, user: str, count: int) -> None:
        items = [{"text": self._new_text(), "tags": ["meanwhile"]} for _ in range(count)]
        if count == 1:
            reply = self._call(user, "remember", {**items[0], "dedup_policy": "insert"})
            ids = [] if reply is None else [reply["memory_id"]]
            kind = "remember"
        else:
            reply = self._call(user, "remember_batch", {"items": items, "dedup_policy": "insert"})
            ids = [] if reply is None else [r["memory_id"] for r in reply["results"]]
            kind = "remember_batch items"
        for item, memory_id in zip(items, ids, strict=True):
            self.expected[int(memory_id)] = {
                "user": user,
                "text": item["text"],
                "tags": item["tags"],
                "metadata": {},
                "deleted": False,
                "forget_reason": None,
            }
            self.done[kind] += 1

    def _edit(self, user: str, memory_id: int, tool: str, arguments: dict[str, Any]) -> bool:
        self.touched.add(memory_id)
        if self._call(user, tool, {"id": memory_id, **arguments}) is None:
            self.uncertain.add(memory_id)
            return False
        self.done[tool if tool == "forget" else f"{tool} {next(iter(arguments))}"] += 1
        return True

    def _update_text(self, user: str, memory_id: int) -> None:
        text = self._new_text()
        if self._edit(user, memory_id, "update_memory", {"text": text}):
            self.expected[memory_id]["text"] = text

    def _update_tags(self, user: str, memory_id: int) -> None:
        tags = ["edited", f"while-sealing-{self.rng.randrange(5)}"]
        if self._edit(user, memory_id, "update_memory", {"tags": tags}):
            self.expected[memory_id]["tags"] = tags

    def _forget(self, user: str, memory_id: int) -> None:
        if self._edit(user, memory_id, "forget", {"reason": "no longer true"}):
            self.expected[memory_id].update(deleted=True, forget_reason="no longer true")

    # --- checking ----------------------------------------------------------------------

    def check(self, after: dict[int, dict[str, Any]]) -> dict[str, Any]:
        """Every expected row in ``after`` (an export) as expected: lost, wrong, extra."""
        lost = [i for i in self.expected if i not in after and i not in self.uncertain]
        wrong = []
        for memory_id, want in self.expected.items():
            got = after.get(memory_id)
            if got is None or memory_id in self.uncertain:
                continue
            differs = [f for f in _FIELDS if _norm(got[f]) != _norm(want[f])]
            if memory_id in self.before and memory_id not in self.touched:
                differs += ["relations"] if got["relations"] != want["relations"] else []
            if differs:
                wrong.append(
                    {"id": memory_id, "fields": differs, "got": {f: got[f] for f in differs}}
                )
        return {
            "rows_expected": len(self.expected),
            "lost": len(lost),
            "lost_ids": lost[:10],
            "wrong": len(wrong),
            "wrong_examples": wrong[:3],
            "rows_not_expected": len([i for i in after if i not in self.expected]),
            "uncertain_rows": len(self.uncertain),
        }


def _norm(value: Any) -> Any:
    """Tags compare as sets (a list's order is the writer's choice)."""
    return (
        sorted(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value)
        else value
    )
