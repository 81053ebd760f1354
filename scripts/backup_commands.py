"""``ownsona export`` and ``ownsona import``: wiring, progress bar and summary.

The rules live in :mod:`memory.backup`; this module opens the database (and,
for import, the embedder), draws the progress bar on stderr and prints what
happened. Memory text is never printed or logged. A finished run leaves one
audit record per account it exported or imported (``entry`` cli; the
owner's console shows it under Activity).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from config.settings import Settings


class _Bar:
    """A tqdm bar on stderr (count, rate, ETA), created once the total is known."""

    def __init__(self, description: str) -> None:
        self._description = description
        self._bar: Any = None

    def start(self, total: int) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=total,
            desc=self._description,
            unit=" memories",
            file=sys.stderr,
            dynamic_ncols=True,
        )

    def advance(self, count: int) -> None:
        if self._bar is not None:
            self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def add_parsers(sub: Any) -> None:
    """Add the ``export`` and ``import`` subcommands to the ``ownsona`` parser."""
    export = sub.add_parser(
        "export", help="write memories as JSON Lines (tombstones, tags, relations; no vectors)"
    )
    who = export.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="the account to export")
    who.add_argument("--all-users", action="store_true", help="every account")
    export.add_argument("--output", "-o", type=Path, help="file to write (default: stdout)")
    restore = sub.add_parser(
        "import", help="restore an export (re-embeds the texts; skips what is already there)"
    )
    restore.add_argument("file", type=Path)
    restore.add_argument("--user", help="put a one-account export into this account")
    restore.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="memories per embedding call and transaction (default 200)",
    )


async def _export(settings: Settings, username: str | None, out: TextIO, bar: _Bar) -> Any:
    from bootstrap.admin import admin_pool
    from bootstrap.sealing import admin_keyring
    from memory.audit import record_command
    from memory.backup import export_store

    async with admin_pool(settings, name="cli-backup", max_size=3) as pool:
        dsn = pool.conninfo
        assert isinstance(dsn, str)
        started = time.monotonic()
        async with admin_keyring(settings, dsn) as keyring:  # sealed rows: opened
            summary = await export_store(
                pool, out.write, username=username, progress=bar, keyring=keyring
            )
        await record_command(
            pool,
            settings,
            "ownsona export",
            [username] if username else None,
            read_only=True,
            duration_s=time.monotonic() - started,
        )
        return summary


async def _import(settings: Settings, args: argparse.Namespace, bar: _Bar) -> Any:
    from auth.accounts import normalize_username
    from bootstrap.admin import admin_pool, migrate_database
    from bootstrap.database import resolve_database
    from bootstrap.providers import make_embedder
    from bootstrap.sealing import admin_keyring
    from memory.audit import record_command
    from memory.backup import DEFAULT_IMPORT_BATCH, import_store
    from memory.backup_file import read_header

    dsn = await resolve_database(settings)
    embedder = await asyncio.to_thread(make_embedder, settings)
    try:
        # An empty database gets its schema, sized for this embedder.
        await migrate_database(settings, dsn, embedder)
        async with (
            admin_pool(settings, name="cli-backup", max_size=3, dsn=dsn) as pool,
            admin_keyring(settings, dsn) as keyring,
        ):
            started = time.monotonic()
            summary = await import_store(
                pool,
                embedder,
                args.file,
                into_user=args.user,
                batch_size=args.batch_size or DEFAULT_IMPORT_BATCH,
                username_rule=normalize_username,
                progress=bar,
                # Sealing on: the rows are written sealed, as a tool's writes are.
                keyring=keyring if settings.seal_memories else None,
            )
            names = [args.user] if args.user else [u.username for u in read_header(args.file).users]
            await record_command(
                pool,
                settings,
                "ownsona import",
                [normalize_username(n) for n in names],
                read_only=False,
                duration_s=time.monotonic() - started,
            )
            return summary
    finally:
        await embedder.aclose()


def run(command: str, settings: Settings, args: argparse.Namespace) -> int:
    """Run ``export`` or ``import``; the exit status (2 for a refused request)."""
    from auth.accounts import normalize_username
    from memory.errors import MemoryServiceError
    from storage.errors import StorageError

    bar = _Bar("export" if command == "export" else "import")
    started = time.monotonic()
    try:
        if command == "export":
            username = normalize_username(args.user) if args.user else None
            if args.output is None:
                summary = asyncio.run(_export(settings, username, sys.stdout, bar))
                sys.stdout.flush()
            else:
                # Written beside the target and renamed at the end: an
                # interrupted export never leaves a file that looks whole.
                partial = args.output.with_name(args.output.name + ".partial")
                try:
                    with partial.open("w", encoding="utf-8") as out:
                        summary = asyncio.run(_export(settings, username, out, bar))
                    os.replace(partial, args.output)
                finally:
                    partial.unlink(missing_ok=True)
            bar.close()
            seconds = time.monotonic() - started
            print(
                f"exported {summary.memories} memories and {summary.relations} relations of "
                f"{summary.users} account(s) in {seconds:.1f} s",
                file=sys.stderr,
            )
            return 0
        if not args.file.is_file():
            print(f"import: no such file {args.file}", file=sys.stderr)
            return 2
        result = asyncio.run(_import(settings, args, bar))
        bar.close()
        seconds = time.monotonic() - started
        print(
            f"imported {result.inserted} memories ({result.renumbered} under new ids) and "
            f"{result.relations} relations in {seconds:.1f} s; skipped {result.already_present} "
            f"already present and {result.duplicates} whose text the account already holds",
        )
        if result.centroids_cleared:
            print(
                f"  {result.centroids_cleared} learned contexts belonged to another embedding "
                "model and were cleared"
            )
        if result.users_created:
            print(
                f"  created accounts without a password: {', '.join(result.users_created)}; "
                "to sign in, start `ownsona serve` once with OWNSONA_LOGIN_USERNAME=<name> and "
                "OWNSONA_LOGIN_PASSWORD=<password>, which sets that account's password"
            )
        return 0
    except MemoryServiceError as ex:
        bar.close()
        print(f"{command} refused: {ex.message}", file=sys.stderr)
        return 2
    except StorageError as ex:
        bar.close()
        print(f"{command}: {ex}", file=sys.stderr)
        return 2
