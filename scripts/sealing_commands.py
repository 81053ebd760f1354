"""``ownsona seal``, ``ownsona keys new`` and ``keys rotate --master``: sealing at rest.

``keys rotate`` alone still rotates the OAuth signing keys, as it always did;
``--master`` re-wraps every user's data key under OWNSONA_MASTER_KEY, the old key
being OWNSONA_MASTER_KEY_PREVIOUS (docs/at-rest.md, "Rotation").
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from config.settings import Settings


def add_key_parsers(keys_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys_sub.add_parser("new", help="print a new random master key (for OWNSONA_MASTER_KEY)")


def add_seal_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    seal = sub.add_parser(
        "seal", help="move every plain memory to sealed storage (resumable, while serving)"
    )
    seal.add_argument("--batch", type=int, default=200, help="rows per transaction")


async def _seal(settings: Settings, batch: int) -> int:
    from tqdm import tqdm

    from bootstrap.admin import admin_pool
    from bootstrap.sealing import UNSEALED_NOTICE, admin_keyring
    from memory.sealing_move import plain_rows, seal_store
    from storage.sealing.errors import MasterKeyError

    if not settings.seal_memories:
        print(
            "ownsona seal: OWNSONA_SEAL_MEMORIES is off: the server keeps writing plain rows,"
            " which a later run will seal",
            file=sys.stderr,
        )
    async with admin_pool(settings) as pool:
        dsn = pool.conninfo
        assert isinstance(dsn, str)
        async with admin_keyring(settings, dsn) as keyring:
            if keyring is None:
                raise MasterKeyError(UNSEALED_NOTICE)
            total = await plain_rows(pool)
            with tqdm(total=total, unit="memory", file=sys.stderr) as bar:

                def advance(sealed: int) -> None:
                    bar.update(sealed)

                sealed = await seal_store(pool, keyring, batch=batch, progress=advance)
                if bar.n < total:
                    # The server's own writes sealed (or forgot) the others meanwhile:
                    # the bar ends at what this run did, not short of a total it missed.
                    bar.total = bar.n
                    bar.refresh()
            if sealed < total:
                print(
                    f"ownsona seal: the other {total - sealed} of the {total} plain rows found"
                    " at the start were sealed or forgotten by the server's writes meanwhile",
                    file=sys.stderr,
                )
            return sealed


def print_new_key() -> int:
    from storage.sealing.master_key import new_key_text

    print(new_key_text())
    print(
        "Keep it apart from the database's backups; losing it loses every sealed memory.",
        file=sys.stderr,
    )
    return 0


async def _rewrap(settings: Settings) -> int:
    from bootstrap.admin import admin_pool
    from bootstrap.sealing import admin_keyring
    from storage.sealing.errors import MasterKeyError

    if not settings.master_key_previous:
        raise MasterKeyError(
            "set OWNSONA_MASTER_KEY to the new key and OWNSONA_MASTER_KEY_PREVIOUS to the old"
            " one (in every process first), then run this again"
        )
    async with admin_pool(settings) as pool:
        dsn = pool.conninfo
        assert isinstance(dsn, str)
        async with admin_keyring(settings, dsn) as keyring:
            assert keyring is not None

            def progress(done: int) -> None:
                print(f"\rre-wrapped {done} data keys", end="", file=sys.stderr, flush=True)

            done = await keyring.rotate(progress=progress)
            print(file=sys.stderr)
            return done


def seal(settings: Settings, args: argparse.Namespace) -> int:
    done = asyncio.run(_seal(settings, args.batch))
    print(f"sealed {done} memories")
    return 0


def rotate_master(settings: Settings) -> int:
    done = asyncio.run(_rewrap(settings))
    print(
        f"re-wrapped {done} data keys under the new master key. Remove"
        " OWNSONA_MASTER_KEY_PREVIOUS from every process, then destroy the old key."
    )
    return 0
