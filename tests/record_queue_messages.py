"""Record the queue messages this checkout's web process builds, for replay by later releases.

Run it from the root of a checkout of the release to record (a temporary
worktree of an old commit, or this one at release time), with any
virtualenv that has OwnSona's dependencies, that checkout first on the path::

    git worktree add --detach /tmp/rel-X <commit>
    cp tests/record_queue_messages.py /tmp/rel-X/   # a commit older than this script
    (cd /tmp/rel-X && PYTHONPATH=. python record_queue_messages.py \
        "$OLDPWD/tests/fixtures/queue_messages/<commit>")

It builds the messages through the release's own code (its broker, actors,
write queue, command parsing and extraction hook), with the in-process
broker, and captures each one as it is enqueued, before any worker could
take it: exactly what that release's web process puts on Redis. Each message
is written as JSON (``dramatiq.Message.asdict()``) to ``OUT_DIR/<name>.json``.

Ids: the calls are made for user :data:`USER_ID` and name memories
:data:`MEMORY_IDS`, sentinel values a replay replaces with the ids of the
rows it created (``tests/tasks/test_replay_messages.py``). Nothing else in a
message is touched.

Supported APIs: the write queue's ``submit(meta, command)`` (6540e3c on) and
``submit(command, user_id, idempotency_key)`` (c098406 and before). A later
release that changes how a message is built updates this script in the same
change, and records its own fixtures with it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from pathlib import Path
from typing import Any

#: The user every recorded call is made for (a replay maps it to a real user).
USER_ID = 900_001
#: Memories the recorded edits name (a replay maps them to rows it stored).
MEMORY_IDS = (900_101, 900_102, 900_103)
#: The request id every recorded call carries.
REQUEST_ID = "req-recorded-0001"
#: A retry-window key (what a client that sends no key gets) and an explicit one.
WINDOW_KEY = "window:" + "ab" * 32
CLIENT_KEY = "client-key-recorded-0001"
#: The app a write speaks for.
CLIENT_ID = "https://recorder.example/client"

#: (fixture name, tool, arguments, key) for every recorded write.
CALLS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    (
        "remember",
        "remember",
        {"text": "My sister Ana lives in Porto.", "tags": ["family"], "dedup_policy": "insert"},
        WINDOW_KEY,
    ),
    (
        "remember_batch",
        "remember_batch",
        {
            "items": [
                {"text": "I grow basil on the balcony.", "dedup_policy": "insert"},
                {"text": "My dentist is Dr. Sousa in Braga.", "dedup_policy": "insert"},
            ]
        },
        CLIENT_KEY + "-batch",
    ),
    (
        "update_memory",
        "update_memory",
        {"id": MEMORY_IDS[0], "text": "My sister Ana lives in Lisbon now.", "tags": ["family"]},
        CLIENT_KEY + "-update",
    ),
    ("forget", "forget", {"id": MEMORY_IDS[1], "reason": "no longer true"}, CLIENT_KEY + "-forget"),
)


class Captured(Exception):
    """Raised by the capturing enqueue: the message is recorded, nothing is queued."""


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    messages = asyncio.run(_record())
    for name, message in messages.items():
        path = out_dir / f"{name}.json"
        path.write_text(json.dumps(message, indent=2, sort_keys=True) + "\n", "utf-8")
        print(f"wrote {path}")


async def _record() -> dict[str, dict[str, Any]]:
    from config.settings import Settings
    from memory.request_ids import request_id_var
    from tasks.actors import declare_actors, extraction_hook
    from tasks.broker import make_broker
    from tasks.queue import DramatiqWriteQueue

    settings = Settings(public_url="http://127.0.0.1:8000")
    bundle = make_broker(None)
    actors = declare_actors(bundle.broker)
    captured: list[Any] = []

    def capture(message: Any, *, delay: Any = None) -> Any:
        captured.append(message)
        raise Captured

    bundle.broker.enqueue = capture  # type: ignore[method-assign]  # this process sends nothing
    queue = DramatiqWriteQueue(bundle, actors, timeout_s=1)
    out: dict[str, dict[str, Any]] = {}
    token = request_id_var.set(REQUEST_ID)
    try:
        for name, tool, args, key in CALLS:
            await _submit(queue, settings, tool, args, key)
            out[name] = _as_json(captured.pop())
        try:
            extraction_hook(actors)(USER_ID, [MEMORY_IDS[2]])
        except Captured:
            out["extract_relations"] = _as_json(captured.pop())
    finally:
        request_id_var.reset(token)
    return out


async def _submit(queue: Any, settings: Any, tool: str, args: dict[str, Any], key: str) -> None:
    """Submit one call as this release's dispatcher would; the capture stops it."""
    params = list(inspect.signature(queue.submit).parameters)
    try:
        if params[:2] == ["meta", "command"]:
            await _submit_with_meta(queue, settings, tool, args, key)
        else:
            await _submit_by_tool(queue, settings, tool, args, key)
    except Exception as ex:  # the capture, however this release's queue wraps it
        if not _is_capture(ex):
            raise


async def _submit_with_meta(
    queue: Any, settings: Any, tool: str, args: dict[str, Any], key: str
) -> None:
    from api.mcp.tools import tool_specs
    from memory.calls import CallMeta
    from memory.writers import Writer
    from memory.writes import IdempotencyKey

    command = tool_specs(settings)[tool].command.parse(args, settings)
    meta = CallMeta(
        USER_ID,
        writer=Writer(CLIENT_ID, None),
        request_id=REQUEST_ID,
        # The dispatcher makes one submission per call (a window key gains its id).
        idempotency_key=IdempotencyKey(key).submitted(),
    )
    await queue.submit(meta, command)


async def _submit_by_tool(
    queue: Any, settings: Any, tool: str, args: dict[str, Any], key: str
) -> None:
    from memory.commands import parse_command
    from memory.writers import Writer, writing_as

    command = parse_command(tool, args, settings)
    with writing_as(Writer(CLIENT_ID, None)):
        await queue.submit(command, USER_ID, key)


def _is_capture(ex: BaseException | None) -> bool:
    while ex is not None:
        if isinstance(ex, Captured):
            return True
        ex = ex.__cause__ or ex.__context__
    return False


def _as_json(message: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(message.asdict()))
    return data


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: record_queue_messages.py OUT_DIR")
    main(Path(sys.argv[1]))
