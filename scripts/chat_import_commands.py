"""``ownsona import-chat FILE --user NAME [--messages]``: memories from a ChatGPT or Claude export.

Prints what the file holds (format, conversations, messages, date range),
then stores: the facts an extractor (``LLM_BASE_URL``, ``LLM_MODEL``) finds in
each conversation, or with ``--messages`` the user's own messages, tagged
``imported``. The rules live in :mod:`memory.chat_import`; this module reads
the file, opens the database and the embedder, and reports progress on
stderr. Memory text is never printed or logged.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.settings import Settings

if TYPE_CHECKING:
    from memory.audit import AuditLog
    from memory.chat_import import StoreBatch
    from memory.deps import Deps


def add_parser(sub: Any) -> None:
    """Add the ``import-chat`` subcommand to the ``ownsona`` parser."""
    parser = sub.add_parser(
        "import-chat",
        help="store memories from a ChatGPT or Claude data export (conversations.json or .zip)",
    )
    parser.add_argument("file", type=Path, help="conversations.json, or the export's .zip")
    parser.add_argument("--user", required=True, help="the account to store the memories in")
    parser.add_argument(
        "--messages",
        action="store_true",
        help="store your own messages (tagged imported) instead of the facts an LLM extracts",
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Run ``import-chat``; 2 when refused (bad file, no extractor), 1 when some of it failed."""
    from bootstrap.providers import make_fact_extractor
    from memory.chat_import import EXTRACT, MESSAGES, ChatImportError
    from memory.rules.chat_exports import ChatExportError, parse_export

    if not args.file.is_file():
        print(f"import-chat: no such file {args.file}", file=sys.stderr)
        return 2
    try:
        export = parse_export(args.file.read_bytes())
    except ChatExportError as ex:
        print(f"import-chat: {ex}", file=sys.stderr)
        return 2
    summary = export.summary
    span = ""
    if summary.first_at and summary.last_at:
        span = f", {summary.first_at:%Y-%m-%d} to {summary.last_at:%Y-%m-%d}"
    print(
        f"found a {summary.format_name} export: {summary.conversations} conversations, "
        f"{summary.messages} messages ({summary.user_messages} of them yours){span}"
    )
    mode = MESSAGES if args.messages else EXTRACT
    extractor = make_fact_extractor(settings) if mode == EXTRACT else None
    if mode == EXTRACT and extractor is None:
        print(
            "import-chat: extracting facts needs an extractor: set LLM_BASE_URL and LLM_MODEL "
            "(any OpenAI-compatible chat-completions endpoint; LLM_API_KEY if it needs one). "
            "Or run it again with --messages to store your own messages as memories "
            "(tagged imported). Nothing was stored.",
            file=sys.stderr,
        )
        return 2
    try:
        report = asyncio.run(_import(settings, args.user, export, mode, extractor))
    except _UnknownAccount as ex:
        print(f"import-chat: no account named {ex.args[0]!r}; nothing was stored.", file=sys.stderr)
        return 2
    except ChatImportError as ex:
        print(f"\nimport-chat: {ex.public_message}", file=sys.stderr)
        return 1
    if report.conversations:
        print(file=sys.stderr)
    print(f"imported: {report.describe()}")
    return 1 if report.failed_conversations else 0


async def _import(settings: Settings, username: str, export: Any, mode: str, extractor: Any) -> Any:
    from auth.accounts import find_account
    from auth.errors import AccountError
    from bootstrap.admin import admin_pool, check_schema
    from bootstrap.providers import make_embedder
    from bootstrap.sealing import admin_keyring
    from memory.audit import COMMAND_CLIENT_ID, AuditLog
    from memory.call_keys import call_scope
    from memory.chat_import import import_chats
    from memory.deps import Deps

    async with admin_pool(settings, name="cli-chat-import", max_size=3) as pool:
        async with pool.connection() as conn:
            await check_schema(conn)
            try:
                user_id = (await find_account(conn, username)).id
            except AccountError as ex:
                if ex.problem != "unknown_user":
                    raise
                raise _UnknownAccount(username) from None
        embedder = await asyncio.to_thread(make_embedder, settings)
        audit = AuditLog(pool, settings)
        try:
            dsn = pool.conninfo
            assert isinstance(dsn, str)
            async with admin_keyring(settings, dsn) as keyring:  # sealed: its writes seal
                deps = Deps(
                    settings=settings,
                    pool=pool,
                    embedder=embedder,
                    fact_extractor=extractor,
                    keyring=keyring,
                )
                scope = await call_scope(deps, user_id)
                return await import_chats(
                    pool,
                    user_id,
                    export,
                    mode=mode,
                    keys=scope.keys if scope is not None else None,
                    store_batch=direct_store(deps, user_id, audit, client_id=COMMAND_CLIENT_ID),
                    extractor=extractor,
                    max_text_chars=settings.max_text_chars,
                    max_batch=settings.max_batch_size,
                    progress=_progress,
                )
        finally:
            await audit.close()
            await embedder.aclose()


class _UnknownAccount(Exception):
    pass


def direct_store(
    deps: Deps, user_id: int, audit: AuditLog | None, *, client_id: str | None = None
) -> StoreBatch:
    """``remember_batch`` run right here (its command, through ``memory.handlers.dispatch``),
    recorded in the audit log as entry ``cli`` under ``client_id`` (the commands' own,
    ``memory.audit.COMMAND_CLIENT_ID``); the rows it stores name that client as their writer."""
    from memory.calls import CallMeta
    from memory.commands import RememberBatch
    from memory.errors import MemoryServiceError
    from memory.handlers import dispatch
    from memory.writers import Writer
    from memory.writes import IdempotencyKey

    writer = Writer(client_id) if client_id else None

    async def store_batch(items: list[dict[str, Any]], key: str) -> dict[str, Any]:
        arguments = {"items": items}
        started = time.monotonic()
        meta = CallMeta(user_id, writer=writer, idempotency_key=IdempotencyKey(key))
        try:
            command = RememberBatch.parse(arguments, deps.settings)
            payload = await dispatch(deps, meta, command)
        except MemoryServiceError as ex:
            payload = ex.to_payload()
        if audit is not None:
            audit.record(
                user_id=user_id,
                entry="cli",
                client_id=client_id,
                token_jti=None,
                tool="remember_batch",
                read_only=False,
                arguments=arguments,
                payload=payload,
                duration_s=time.monotonic() - started,
            )
        return payload

    return store_batch


def _progress(done: int, total: int, report: Any) -> None:
    print(
        f"\r  {done}/{total} conversations, {report.stored} memories stored",
        end="",
        file=sys.stderr,
        flush=True,
    )
