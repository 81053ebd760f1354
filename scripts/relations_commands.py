"""``ownsona relations rebuild [--user NAME]``: extract every memory's relation edges again.

Runs the configured extractor (``RELATION_EXTRACTOR``) in this process, with
or without a server running; prints the counts. Memories it could not do stay
owed in the outbox, and a web process's sweep retries them later.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from config.settings import Settings


def add_parsers(sub: Any) -> None:
    """Add the ``relations`` subcommand to the ``ownsona`` parser."""
    relations = sub.add_parser("relations", help="the relation graph")
    relations_sub = relations.add_subparsers(dest="relations_command", required=True)
    rebuild = relations_sub.add_parser(
        "rebuild", help="re-extract the relations of every active memory (replaces their edges)"
    )
    rebuild.add_argument("--user", help="only this account's memories (default: every account)")


async def _rebuild(settings: Settings, username: str | None) -> Any:
    from auth.accounts import find_account, normalize_username
    from auth.errors import AccountError
    from bootstrap.admin import admin_pool, check_schema, extraction_deps
    from memory.audit import record_command
    from memory.relations import rebuild_relations

    async with admin_pool(settings, name="cli-relations", max_size=4) as pool:
        async with pool.connection() as conn:
            await check_schema(conn)
            user_id = None
            if username is not None:
                try:
                    user_id = (await find_account(conn, username)).id
                except AccountError as ex:
                    if ex.problem != "unknown_user":
                        raise  # a malformed name: `account error: ...`, exit status 2
                    raise SystemExit(f"No account named {username!r}.") from None
        started = time.monotonic()
        async with extraction_deps(settings, pool) as deps:
            summary = await rebuild_relations(deps, user_id, progress=_progress)
        await record_command(
            pool,
            settings,
            "ownsona relations rebuild",
            [normalize_username(username)] if username is not None else None,
            read_only=False,
            duration_s=time.monotonic() - started,
        )
        return summary


def _progress(summary: Any) -> None:
    done = summary.extracted + summary.skipped + summary.failed
    print(f"\r  {done}/{summary.memories} memories", end="", file=sys.stderr, flush=True)


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Run ``relations rebuild``; 1 when some extractions failed (they stay owed), 2 when refused."""
    if settings.relation_extractor == "off":
        # Extracting with no extractor stores no edges: the rebuild would only delete them all.
        print(
            "RELATION_EXTRACTOR is off: a rebuild would delete every relation edge and extract none. "
            "Set RELATION_EXTRACTOR to rules or llm and run it again.",
            file=sys.stderr,
        )
        return 2
    summary = asyncio.run(_rebuild(settings, args.user))
    if summary.memories:
        print(file=sys.stderr)
    who = f"of {args.user!r}" if args.user else "of every account"
    print(
        f"relations rebuilt {who}: {summary.extracted} memories extracted, {summary.edges} edges, "
        f"{summary.skipped} skipped (forgotten or changed meanwhile), {summary.failed} failed"
    )
    if summary.failed:
        print(
            f"{summary.failed} extractions failed (see the log); they stay owed and a running "
            "server retries them, or run the rebuild again.",
            file=sys.stderr,
        )
        return 1
    return 0
