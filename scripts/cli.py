"""The ``ownsona`` command: serve, stdio, worker, migrate, user, token, keys, reembed, export, import."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from auth.errors import AccountError
from bootstrap.admin import DatabaseNotSetUp
from config.settings import Settings, SettingsError, check_listen_host, public_listen_problem
from storage.errors import StorageError
from storage.sealing.errors import SealingError

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

_T = TypeVar("_T")

_log = logging.getLogger("ownsona")


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env()
    changes = {}
    if getattr(args, "host", None):
        changes["host"] = check_listen_host("--host", args.host)
    if getattr(args, "port", None):
        changes["port"] = args.port
        if not settings.public_url_set:
            changes["public_url"] = f"http://127.0.0.1:{args.port}"
    return settings.with_overrides(**changes) if changes else settings


# --- serve -------------------------------------------------------------------


def _serve(settings: Settings) -> None:
    from bootstrap.providers import rerank_endpoint
    from bootstrap.serve import fast_event_loop, serve
    from scripts.account_commands import record_public_url

    problem = public_listen_problem(settings)
    if problem is not None:
        raise SettingsError("OWNSONA_HOST", problem)

    def announce(notices: Sequence[str]) -> None:
        record_public_url(settings)  # so `ownsona token` signs for this URL
        print(f"OwnSona is serving MCP at {settings.resource_url}", flush=True)
        print(f"  listening on http://{settings.host}:{settings.port}", flush=True)
        print(f"  your console: {settings.public_url}/console", flush=True)
        database = (
            "DATABASE_URL"
            if settings.database_url
            else f"embedded PostgreSQL in {settings.data_dir / 'pg'}"
        )
        print(f"  database: {database}", flush=True)
        queue = (
            "Redis (REDIS_SENTINELS); run `ownsona worker` too"
            if settings.redis_sentinel
            else "Redis (REDIS_URL); run `ownsona worker` too"
            if settings.redis_url
            else "in-process worker"
        )
        print(f"  queue: {queue}", flush=True)
        endpoint = rerank_endpoint(settings)
        if endpoint is not None:
            print(f"  reranker: {settings.rerank_provider} at {endpoint}", flush=True)
        for notice in notices:
            print(f"  {notice}", flush=True)

    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        runner.run(serve(settings, announce=announce))


# --- admin -------------------------------------------------------------------


async def _with_pool(settings: Settings, fn: Callable[[AsyncConnectionPool], Awaitable[_T]]) -> _T:
    from bootstrap.admin import admin_pool

    async with admin_pool(settings) as pool:
        return await fn(pool)


async def _migrate(settings: Settings) -> list[int]:
    from bootstrap.admin import migrate_database

    return await migrate_database(settings)


def _read_password(prompt_twice: bool) -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("Password: ")
    if prompt_twice and getpass.getpass("Again: ") != first:
        raise SystemExit("The passwords differ.")
    return first


async def _user_add(settings: Settings, name: str, password: str) -> int:
    from auth.accounts import add_user

    return await _with_pool(settings, lambda pool: add_user(pool, name, password))


async def _user_passwd(settings: Settings, name: str, password: str) -> int:
    from auth.accounts import change_password

    return await _with_pool(settings, lambda pool: change_password(pool, name, password))


async def _rotate_keys(settings: Settings) -> str:
    from auth.keys import KeyStore

    async def run(pool: AsyncConnectionPool) -> str:
        keystore = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
        await keystore.load()
        return await keystore.rotate()

    return await _with_pool(settings, run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ownsona", description="OwnSona personal-memory server")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve", help="run the MCP server (embedded PostgreSQL when DATABASE_URL is unset)"
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default $PORT or 8000)")
    worker = sub.add_parser(
        "worker", help="run a Dramatiq worker for queued writes (needs REDIS_URL)"
    )
    worker.add_argument(
        "--threads", type=int, help="threads per process (default $WORKER_THREADS or 4)"
    )
    worker.add_argument(
        "--processes", type=int, help="worker processes (default $WORKER_PROCESSES or 1)"
    )
    sub.add_parser("migrate", help="apply database migrations")
    user = sub.add_parser("user", help="manage accounts")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = user_sub.add_parser("add", help="create an account (password from prompt or stdin)")
    add.add_argument("name")
    passwd = user_sub.add_parser(
        "passwd",
        help="set a new password (prompt or stdin); ends the account's sign-ins and tokens",
    )
    passwd.add_argument("name")
    from scripts import account_commands, sealing_commands

    account_commands.add_user_parsers(user_sub)  # list, disable, enable, delete
    account_commands.add_token_parser(sub)  # token [list | revoke]
    keys = sub.add_parser("keys", help="signing keys; the master key of sealing at rest")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    rotate = keys_sub.add_parser(
        "rotate", help="add a new signing key; old tokens stay valid until they expire"
    )
    rotate.add_argument(
        "--master",
        action="store_true",
        help="instead: re-wrap every data key under OWNSONA_MASTER_KEY"
        " (the old key in OWNSONA_MASTER_KEY_PREVIOUS)",
    )
    sealing_commands.add_key_parsers(keys_sub)  # new
    sealing_commands.add_seal_parser(sub)  # seal
    reembed = sub.add_parser(
        "reembed", help="re-embed every memory with the configured embedding model"
    )
    reembed.add_argument(
        "--dry-run", action="store_true", help="count the rows to re-embed; change nothing"
    )
    reembed.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    reembed.add_argument(
        "--in-flight",
        type=int,
        help="batches in flight (default 1 with the local model, 2 with a provider, 8 with REDIS_URL)",
    )
    reembed.add_argument(
        "--worker",
        action="store_true",
        help="instead: run a worker for this model's re-embedding batches only",
    )
    reembed.add_argument(
        "--threads", type=int, default=2, help="threads of the --worker (default 2)"
    )
    from scripts import backup_commands

    backup_commands.add_parsers(sub)  # export, import
    from scripts import chat_import_commands

    chat_import_commands.add_parser(sub)  # import-chat
    from scripts import relations_commands

    relations_commands.add_parsers(sub)  # relations rebuild
    from scripts import db_commands

    db_commands.add_parsers(sub)  # db status, db stop
    from scripts import stdio_commands

    stdio_commands.add_parser(sub)  # stdio
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from bootstrap.logs import configure_logging

    args = build_parser().parse_args(argv)
    try:
        settings = _settings(args)
        configure_logging(settings)  # JSON lines with request ids (LOG_FORMAT, LOG_LEVEL)
        if args.command == "serve":
            _serve(settings)
        elif args.command == "worker":
            threads = args.threads or settings.worker_threads
            processes = args.processes or settings.worker_processes
            if processes > 1:
                from scripts.worker_processes import run_worker_processes

                return run_worker_processes(processes, threads)
            from bootstrap.worker import run_worker_process

            return run_worker_process(settings, threads)
        elif args.command == "migrate":
            applied = asyncio.run(_migrate(settings))
            print(f"applied migrations: {applied}" if applied else "database is up to date")
        elif args.command == "user" and args.user_command not in ("add", "passwd"):
            from scripts import account_commands

            return account_commands.run_user(settings, args)
        elif args.command == "user":
            password = _read_password(prompt_twice=True)
            if args.user_command == "passwd":
                asyncio.run(_user_passwd(settings, args.name, password))
                print(f"new password set for {args.name!r}")
            else:
                user_id = asyncio.run(_user_add(settings, args.name, password))
                print(f"created account {args.name!r} (id {user_id})")
        elif args.command == "token":
            from scripts import account_commands

            return account_commands.run_token(settings, args)
        elif args.command == "seal":
            from scripts import sealing_commands

            return sealing_commands.seal(settings, args)
        elif args.command == "keys" and (args.keys_command == "new" or args.master):
            from scripts import sealing_commands

            if args.keys_command == "new":
                return sealing_commands.print_new_key()
            return sealing_commands.rotate_master(settings)
        elif args.command == "keys":
            print(f"new signing key: {asyncio.run(_rotate_keys(settings))}")
        elif args.command == "reembed":
            from scripts import reembed as reembedding

            if args.worker:
                return reembedding.serve_batches(settings, args.threads)
            return reembedding.main(
                settings, dry_run=args.dry_run, batch_size=args.batch_size, in_flight=args.in_flight
            )
        elif args.command in ("export", "import"):
            from scripts import backup_commands

            return backup_commands.run(args.command, settings, args)
        elif args.command == "import-chat":
            from scripts import chat_import_commands

            return chat_import_commands.run(settings, args)
        elif args.command == "relations":
            from scripts import relations_commands

            return relations_commands.run(settings, args)
        elif args.command == "db":
            from scripts import db_commands

            return db_commands.run(settings, args)
        elif args.command == "stdio":
            from scripts import stdio_commands

            return stdio_commands.run(settings, args)
    except SettingsError as ex:
        print(f"configuration error: {ex}", file=sys.stderr)
        return 2
    except AccountError as ex:
        print(f"account error: {ex}", file=sys.stderr)
        return 2
    except DatabaseNotSetUp as ex:
        print(f"ownsona {args.command}: {ex}", file=sys.stderr)
        return 2
    except StorageError as ex:
        print(f"start-up failed: {ex}", file=sys.stderr)
        return 1
    except SealingError as ex:
        # A wrong or missing master key: refused, never served as empty results.
        print(f"ownsona {args.command}: sealing at rest: {ex}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
