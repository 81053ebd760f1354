"""``ownsona user list|disable|enable|delete`` and ``ownsona token [list|revoke]``.

The use cases live in :mod:`auth.accounts` and :mod:`auth.cli_tokens`; this
module parses, asks for confirmation and prints. Passwords and tokens are never
logged; a minted token is printed once, on stdout, and stored only by its
``jti``.

It also keeps the file that tells ``ownsona token`` which URL the running
server uses (:func:`record_public_url`): without ``OWNSONA_PUBLIC_URL`` the
issuer follows ``--port``, which a separate ``ownsona token`` process cannot
know.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from config.settings import Settings

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

_T = TypeVar("_T")

#: In the data dir: the public URL of the last ``ownsona serve`` (one line).
PUBLIC_URL_FILE = "public_url"


# -- the recorded public URL -----------------------------------------------------


def record_public_url(settings: Settings) -> None:
    """Write the URL the server signs tokens for; best effort (a read-only data dir is fine)."""
    path = settings.data_dir / PUBLIC_URL_FILE
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{PUBLIC_URL_FILE}.{os.getpid()}")
        temporary.write_text(settings.public_url + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass


def recorded_public_url(data_dir: Path) -> str | None:
    try:
        url = (data_dir / PUBLIC_URL_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return url if url.startswith(("http://", "https://")) and " " not in url else None


def settings_for_minting(settings: Settings) -> Settings:
    """The settings with the running server's URL when OWNSONA_PUBLIC_URL is not set.

    A token's ``iss`` and ``aud`` must be the server's, or every call gets
    401 "wrong issuer": after ``ownsona serve --port 18100`` they follow that
    port, recorded in the data dir at start-up.
    """
    if settings.public_url_set:
        return settings
    url = recorded_public_url(settings.data_dir)
    return settings.with_overrides(public_url=url) if url else settings


# -- parsers ----------------------------------------------------------------------


def add_user_parsers(user_sub: Any) -> None:
    """``user list|disable|enable|delete`` beside ``add`` and ``passwd``."""
    user_sub.add_parser("list", help="accounts: created, disabled, last sign-in, memories")
    disable = user_sub.add_parser(
        "disable", help="refuse the account's tokens and sign-ins until enabled again"
    )
    disable.add_argument("name")
    enable = user_sub.add_parser("enable", help="undo disable")
    enable.add_argument("name")
    delete = user_sub.add_parser(
        "delete", help="delete the account with its memories, relations, grants and tokens"
    )
    delete.add_argument("name")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def add_token_parser(sub: Any) -> None:
    token = sub.add_parser(
        "token", help="print a fresh access token for scripts and curl; list or revoke tokens"
    )
    token.add_argument("--user", help="the account the token speaks for")
    token.add_argument("--ttl", type=int, help="lifetime in seconds (default ACCESS_TOKEN_TTL)")
    token.add_argument("--scope", default="memory:read memory:write")
    token.add_argument("--name", help="a label shown by `ownsona token list`")
    token_sub = token.add_subparsers(dest="token_command")
    listing = token_sub.add_parser("list", help="live tokens and OAuth grants")
    listing.add_argument("--user", dest="list_user", help="only this account's")
    revoke = token_sub.add_parser("revoke", help="end a token or grant at once")
    revoke.add_argument("id", nargs="?", help="an ID from `ownsona token list` (t12, g5)")
    revoke.add_argument("--all", action="store_true", help="every token and grant of --user")
    revoke.add_argument("--user", dest="revoke_user", help="with --all: the account")


# -- running ---------------------------------------------------------------------


def run_user(settings: Settings, args: argparse.Namespace) -> int:
    command = args.user_command
    if command == "list":
        from auth.accounts import list_accounts

        _print_accounts(asyncio.run(_with_pool(settings, list_accounts)))
        return 0
    if command in ("disable", "enable"):
        from auth.accounts import set_disabled

        disabled = command == "disable"
        asyncio.run(_with_pool(settings, lambda pool: set_disabled(pool, args.name, disabled)))
        print(f"account {args.name!r} {'disabled' if disabled else 'enabled'}")
        return 0
    return _delete_user(settings, args.name, args.yes)


def run_token(settings: Settings, args: argparse.Namespace) -> int:
    if args.token_command == "list":
        from auth.cli_tokens import live_tokens

        user = args.list_user
        tokens, grants = asyncio.run(_with_pool(settings, lambda pool: live_tokens(pool, user)))
        _print_tokens(tokens, grants)
        return 0
    if args.token_command == "revoke":
        return _revoke(settings, args)
    if not args.user:
        print("ownsona token: --user NAME is required to mint a token", file=sys.stderr)
        return 2
    settings = settings_for_minting(settings)
    from auth.tokens import max_lifetime_s

    if args.ttl is not None and not 0 < args.ttl <= max_lifetime_s(settings):
        print(
            f"ownsona token: --ttl must be 1 to {max_lifetime_s(settings)} seconds "
            "(ACCESS_TOKEN_MAX_LIFETIME)",
            file=sys.stderr,
        )
        return 2
    print(_mint(settings, args))
    return 0


async def _with_pool(settings: Settings, fn: Callable[[AsyncConnectionPool], Awaitable[_T]]) -> _T:
    from bootstrap.admin import admin_pool

    async with admin_pool(settings) as pool:
        return await fn(pool)


def _print_accounts(rows: list[Any]) -> None:
    print(f"{'NAME':<24} {'CREATED':<17} {'DISABLED':<8} {'LAST SIGN-IN':<17} MEMORIES")
    for row in rows:
        print(
            f"{row.username:<24} {_when(row.created_at):<17} {'yes' if row.disabled else 'no':<8} "
            f"{_when(row.last_sign_in_at):<17} {row.memory_count}"
        )


def _delete_user(settings: Settings, name: str, yes: bool) -> int:
    from auth.accounts import delete_account, normalize_username

    username = normalize_username(name)
    if not yes:
        if not sys.stdin.isatty():
            print(
                f"ownsona user delete: refusing to delete {username!r} without confirmation; "
                "add --yes",
                file=sys.stderr,
            )
            return 2
        answer = input(
            f"Delete account {username!r} with all its memories, relations, grants and tokens? "
            "Type its name to confirm: "
        )
        if answer.strip().lower() != username:
            print("nothing deleted", file=sys.stderr)
            return 1

    async def delete(pool: AsyncConnectionPool) -> Any:
        from bootstrap.sealing import admin_keyring

        dsn = pool.conninfo
        assert isinstance(dsn, str)
        async with admin_keyring(settings, dsn) as keyring:
            # Sealed: the user's data key goes first, so no copy of their rows opens again.
            destroy = keyring.destroy if keyring is not None else None
            return await delete_account(pool, username, destroy_key=destroy)

    removed = asyncio.run(_with_pool(settings, delete))
    print(
        f"deleted account {username!r}: {removed.memories} memories, {removed.relations} "
        f"relations, {removed.grants} OAuth grants, {removed.tokens} CLI tokens"
    )
    return 0


def _mint(settings: Settings, args: argparse.Namespace) -> str:
    """The new token; an unknown or disabled account ends the command (exit status 1)."""
    from auth.cli_tokens import mint_cli_token
    from auth.errors import AccountError

    try:
        return asyncio.run(
            _with_pool(
                settings,
                lambda pool: mint_cli_token(
                    pool,
                    settings,
                    username=args.user,
                    scope=args.scope,
                    ttl_s=args.ttl,
                    label=args.name,
                ),
            )
        )
    except AccountError as ex:
        if ex.problem not in ("unknown_user", "account_disabled"):
            raise  # a malformed name: `account error: ...`, exit status 2, as for every command
        raise SystemExit(ex.message) from None


def _print_tokens(cli_tokens: list[Any], grants: list[Any]) -> None:
    print(
        f"{'ID':<8} {'USER':<16} {'NAME / CLIENT':<24} {'SCOPES':<26} {'ISSUED':<17} "
        f"{'LAST USED':<17} EXPIRES"
    )
    for t in cli_tokens:
        print(
            f"{'t' + str(t.id):<8} {t.username:<16} {(t.label or 'ownsona token'):<24} "
            f"{t.scope:<26} {_when(t.issued_at):<17} {_when(t.last_used_at):<17} "
            f"{_when(t.expires_at)}"
        )
    for g in grants:
        client = g.client_name or g.client_id
        print(
            f"{'g' + str(g.id):<8} {g.username:<16} {client[:24]:<24} {g.scope:<26} "
            f"{_when(g.created_at):<17} {_when(g.last_used_at):<17} {_when(g.expires_at)}"
        )


def _revoke(settings: Settings, args: argparse.Namespace) -> int:
    from auth.cli_tokens import revoke_all, revoke_cli_token, revoke_grant

    if args.all:
        if not args.revoke_user or args.id:
            print("ownsona token revoke: use either ID or --all --user NAME", file=sys.stderr)
            return 2
        grants = asyncio.run(_with_pool(settings, lambda pool: revoke_all(pool, args.revoke_user)))
        print(f"ended every token of {args.revoke_user!r} ({grants} OAuth grants revoked)")
        return 0
    kind, number = (args.id or "")[:1], (args.id or "")[1:]
    if kind not in ("t", "g") or not number.isdigit() or len(number) > 18:
        print(
            "ownsona token revoke: ID is t<number> or g<number>, see `ownsona token list`",
            file=sys.stderr,
        )
        return 2
    # t<number> names a CLI token, g<number> an OAuth grant (as `token list` shows them).
    revoke = revoke_cli_token if kind == "t" else revoke_grant
    if not asyncio.run(_with_pool(settings, lambda pool: revoke(pool, int(number)))):
        print(f"ownsona token revoke: no live token or grant {args.id}", file=sys.stderr)
        return 1
    print(f"revoked {args.id}")
    return 0


def _when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if moment else "-"
