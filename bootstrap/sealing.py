"""The keyring every process seals with: master key from the settings, key store beside the data.

:func:`build_keyring` reads the master key (``memory.keyring.load_master_keys``;
the embedded default generates one on first start) and builds a closed pool on
the key store; nothing connects. :func:`open_keyring` creates the key store if it
is the default one beside the data database, opens the pool and refuses a master
key the store was not sealed with (:class:`storage.sealing.errors.MasterKeyError`).
A deployment on DATABASE_URL without a master key gets no keyring: it keeps
working unsealed, and :data:`UNSEALED_NOTICE` says how to seal it; unless its key
store records a master key (it was sealed): then the missing key is refused, as a
wrong one is, since its sealed rows would not open.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from memory.keyring import KEY_FILE_NAME, Keyring, generated_key_notice, load_master_keys
from storage import key_store
from storage.sealing.errors import MasterKeyError

UNSEALED_NOTICE = (
    "memories are NOT sealed at rest: no master key is set. Set OWNSONA_MASTER_KEY (or"
    " OWNSONA_MASTER_KEY_FILE; make one with `ownsona keys new`) in every process, restart,"
    " then run `ownsona seal` (docs/at-rest.md)."
)


@dataclass
class Sealing:
    """A process's keyring (None: unsealed) and what to tell the operator about it."""

    keyring: Keyring | None
    #: The embedded default's key file, when this start generated it.
    generated: Path | None = None
    #: Whether the key store is the default one beside the data database (created if missing).
    beside_data: bool = True
    #: OWNSONA_SEAL_MEMORIES: whether new writes are sealed (the key alone seals nothing).
    sealing_on: bool = False
    #: OWNSONA_KEYSTORE_URL (None: the default store beside the data database).
    keystore_url: str | None = field(default=None, repr=False)
    #: The embedded default's key file, when the key is that file's (generated or not).
    default_key_file: Path | None = None

    @property
    def notices(self) -> list[str]:
        if self.keyring is None:
            return [UNSEALED_NOTICE]
        if self.generated is not None:
            return [generated_key_notice(self.generated, sealing_on=self.sealing_on)]
        return []


def build_keyring(settings: Settings, data_dsn: Callable[[], Awaitable[str]] | str) -> Sealing:
    """The process's keyring on a closed key store pool (connects to nothing)."""
    keys = load_master_keys(settings)
    if keys.current is None:
        return Sealing(
            None, beside_data=not settings.keystore_url, keystore_url=settings.keystore_url
        )

    async def keystore_dsn() -> str:
        if settings.keystore_url:
            return settings.keystore_url
        return key_store.beside(data_dsn if isinstance(data_dsn, str) else await data_dsn())

    pool = key_store.make_key_store_pool(keystore_dsn)
    keyring = Keyring(keys.current, pool, previous=keys.previous)
    from_default_file = not (
        settings.master_key or settings.master_key_file or settings.database_url
    )
    return Sealing(
        keyring,
        keys.generated,
        beside_data=not settings.keystore_url,
        sealing_on=settings.seal_memories,
        default_key_file=settings.data_dir / KEY_FILE_NAME if from_default_file else None,
    )


async def open_keyring(sealing: Sealing, data_dsn: str) -> None:
    """Create the key store if need be, open its pool, and check the master key.

    Without a master key: refuse a deployment whose key store was sealed before.
    """
    keyring = sealing.keyring
    if keyring is None:
        await _refuse_a_missing_key(sealing, data_dsn)
        return
    dsn = await keyring.pool_dsn()
    await key_store.ensure_key_store(dsn, create_from=data_dsn if sealing.beside_data else None)
    await keyring.open()
    try:
        await keyring.check()
    except MasterKeyError:
        await keyring.close()
        if sealing.default_key_file is None:
            raise
        known = await key_store.recorded_master_keys(dsn)
        raise _not_the_default_key_file(sealing, known) from None
    except BaseException:
        await keyring.close()
        raise


def _not_the_default_key_file(sealing: Sealing, known: list[str]) -> MasterKeyError:
    """The embedded default's ``master.key`` is not the key its memories are sealed under.

    Said in terms of that file, which is what the operator has to put back (they set
    no OWNSONA_MASTER_KEY). Nothing is deleted here: a file this start generated
    because the original was missing stays until the operator replaces it, so no
    key they are restoring meanwhile can be the one removed.
    """
    path = sealing.default_key_file
    missing = (
        " It was missing, and this start wrote a new key there, which opens nothing."
        if sealing.generated is not None
        else ""
    )
    return MasterKeyError(
        f"the master key file {path} does not hold the key this deployment's memories are"
        f" sealed under (master key {', '.join(known)}).{missing} Put the original master.key"
        f" back in {path} (from where you backed it up); without it no sealed memory opens."
    )


async def _refuse_a_missing_key(sealing: Sealing, data_dsn: str) -> None:
    """Starting unsealed on a sealed store would serve errors for every sealed memory and
    write new ones in the clear beside them: refused at start-up, naming the setting."""
    if sealing.keystore_url:
        known = await key_store.recorded_master_keys(sealing.keystore_url)
    else:
        known = await key_store.recorded_master_keys(
            key_store.beside(data_dsn), beside_data=data_dsn
        )
    if known:
        raise MasterKeyError(
            "no master key is set (OWNSONA_MASTER_KEY or OWNSONA_MASTER_KEY_FILE), but this"
            f" deployment's key store holds data keys under master key {', '.join(known)}:"
            " set that key in every process; without it no sealed memory opens."
        )


@contextlib.asynccontextmanager
async def admin_keyring(settings: Settings, data_dsn: str) -> AsyncIterator[Keyring | None]:
    """An opened keyring for a command (None: the deployment is not sealed)."""
    sealing = build_keyring(settings, data_dsn)
    await open_keyring(sealing, data_dsn)
    try:
        yield sealing.keyring
    finally:
        if sealing.keyring is not None:
            await sealing.keyring.close()
