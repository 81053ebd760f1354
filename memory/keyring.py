"""The keyring: per-user data keys from the key store, opened with the master key, cached.

- :meth:`Keyring.check` at start-up: the configured master key must be the one the
  key store was sealed with (its check value opens), else :class:`MasterKeyError`;
  a first start records the key's check value.
- :meth:`Keyring.user_keys`: the user's opened keys (:class:`storage.sealing.user_keys.UserKeys`),
  created on the user's first sealed write; a bounded LRU in process memory.
- :meth:`Keyring.destroy`: deleting a user destroys the wrapped key (crypto-shredding)
  and drops it from this process's cache.
- :meth:`Keyring.rotate`: re-wraps every data key under the current master key; the
  data keys themselves, and so every sealed value, stay as they are.

Online rotation: every process runs with the new key as ``OWNSONA_MASTER_KEY`` and
the old one as ``OWNSONA_MASTER_KEY_PREVIOUS`` (both open, new keys are wrapped
under the new one); ``ownsona keys rotate`` re-wraps the rest; the previous key is
then removed from the settings and destroyed (docs/at-rest.md, "Rotation").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from psycopg_pool import AsyncConnectionPool

from config.settings import Settings
from storage import key_store
from storage.sealing import envelope
from storage.sealing.errors import DataKeyGone, MasterKeyError
from storage.sealing.master_key import MasterKey, create_key_file, parse_master_key, read_key_file
from storage.sealing.user_keys import UserKeys

#: Users whose opened keys a process keeps (each ~200 bytes with its AES context).
DEFAULT_CACHE_SIZE = 4096


#: The embedded default's generated master key, in its data folder.
KEY_FILE_NAME = "master.key"


@dataclass(frozen=True)
class MasterKeys:
    """The configured master key (None: this deployment is not sealed) and the previous one."""

    current: MasterKey | None
    previous: MasterKey | None = None
    #: Where a key was generated on this start (the embedded default's first start).
    generated: Path | None = None


def load_master_keys(settings: Settings) -> MasterKeys:
    """The master key from OWNSONA_MASTER_KEY or OWNSONA_MASTER_KEY_FILE.

    Neither set: the embedded default (no DATABASE_URL) uses ``<data dir>/master.key``,
    generated on first start; a deployment on DATABASE_URL has none (unsealed).
    :class:`MasterKeyError` names the setting of a malformed key.
    """
    previous = (
        parse_master_key(settings.master_key_previous, source="OWNSONA_MASTER_KEY_PREVIOUS")
        if settings.master_key_previous
        else None
    )
    if settings.master_key and settings.master_key_file:
        raise MasterKeyError("set OWNSONA_MASTER_KEY or OWNSONA_MASTER_KEY_FILE, not both")
    if settings.master_key:
        return MasterKeys(
            parse_master_key(settings.master_key, source="OWNSONA_MASTER_KEY"), previous
        )
    if settings.master_key_file:
        key = read_key_file(settings.master_key_file, source="OWNSONA_MASTER_KEY_FILE")
        return MasterKeys(key, previous)
    if settings.database_url:
        return MasterKeys(None, previous)
    path = settings.data_dir / KEY_FILE_NAME
    created = create_key_file(path)
    key = read_key_file(path, source="the embedded default's master key")
    return MasterKeys(key, previous, path if created else None)


def generated_key_notice(path: Path, *, sealing_on: bool = True) -> str:
    """What the embedded default says, once, when it generates the master key."""
    if not sealing_on:
        return (
            f"OwnSona generated a master key for sealing memories at rest: {path}\n"
            "  Memories are not sealed yet: OWNSONA_SEAL_MEMORIES is off (docs/at-rest.md)."
            " Back the key up apart from the data folder's backups: once memories are"
            " sealed, nothing can open them without it."
        )
    return (
        f"OwnSona generated the master key that seals your memories: {path}\n"
        "  Back it up somewhere safe, apart from the data folder's backups."
        " LOSING IT LOSES EVERY MEMORY: nothing can open them without it."
    )


class Keyring:
    def __init__(
        self,
        master: MasterKey,
        pool: AsyncConnectionPool,
        *,
        previous: MasterKey | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.master = master
        self._previous = previous
        self._pool = pool
        self._cache: OrderedDict[int, UserKeys] = OrderedDict()
        self._cache_size = cache_size

    def __repr__(self) -> str:
        return f"Keyring(master={self.master.id})"

    async def pool_dsn(self) -> str:
        """The key store's DSN (the pool's conninfo, resolved if it is a callable)."""
        conninfo = self._pool.conninfo
        if callable(conninfo):
            resolved = conninfo()
            return resolved if isinstance(resolved, str) else await resolved
        return conninfo

    async def open(self) -> None:
        await self._pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        self._cache.clear()
        await self._pool.close()

    def _masters(self) -> dict[str, MasterKey]:
        keys = {self.master.id: self.master}
        if self._previous is not None:
            keys[self._previous.id] = self._previous
        return keys

    async def check(self) -> None:
        """Refuse a master key the key store was not sealed with; record a new store's key."""
        async with self._pool.connection() as conn:
            checks = await key_store.check_values(conn)
            for key in self._masters().values():
                check = checks.get(key.id)
                if check is not None and not key.verify(check):
                    raise MasterKeyError(f"master key {key.id}: its check value does not open")
            known = [k for k in self._masters().values() if k.id in checks]
            if checks and not known:
                raise MasterKeyError(
                    "OWNSONA_MASTER_KEY is not the master key this store's data keys are wrapped"
                    f" with (configured key id {self.master.id}; the key store knows"
                    f" {', '.join(sorted(checks))}). Set the original key; losing it loses"
                    " every sealed memory."
                )
            await key_store.add_check_value(conn, self.master.id, self.master.check_value())

    def _remember(self, keys: UserKeys) -> UserKeys:
        self._cache[keys.user_id] = keys
        self._cache.move_to_end(keys.user_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return keys

    def cached(self, user_id: int) -> UserKeys | None:
        keys = self._cache.get(user_id)
        if keys is not None:
            self._cache.move_to_end(user_id)
        return keys

    async def user_keys(self, user_id: int, *, create: bool = True) -> UserKeys:
        """The user's opened keys; a new data key on first use when ``create``.

        :class:`DataKeyGone` when there is none and ``create`` is false (a deleted
        user's rows, in a restored backup, say).
        """
        keys = self.cached(user_id)
        if keys is not None:
            return keys
        async with self._pool.connection() as conn:
            stored = await key_store.wrapped_key(conn, user_id)
            if stored is None:
                if not create:
                    raise DataKeyGone(f"user {user_id} has no data key (deleted)")
                wrapped = envelope.wrap(self.master, user_id, envelope.new_data_key())
                stored = await key_store.add_wrapped_key(conn, user_id, self.master.id, wrapped)
        key_id, wrapped = stored
        master = self._masters().get(key_id)
        if master is None:
            raise MasterKeyError(
                f"user {user_id}: data key wrapped under master key {key_id}, which is not"
                " configured (set it as OWNSONA_MASTER_KEY_PREVIOUS until `ownsona keys rotate`)"
            )
        return self._remember(UserKeys(user_id, envelope.unwrap(master, user_id, wrapped)))

    async def destroy(self, user_id: int) -> bool:
        """Destroy the user's data key: no copy of their sealed rows opens any more."""
        self._cache.pop(user_id, None)
        async with self._pool.connection() as conn:
            return await key_store.delete_wrapped_key(conn, user_id)

    def forget_cached(self, user_id: int) -> None:
        """Drop the user's keys from this process (another process deleted the user)."""
        self._cache.pop(user_id, None)

    async def rotate(
        self, *, batch: int = 500, progress: Callable[[int], None] | None = None
    ) -> int:
        """Re-wrap every data key not under the current master key; return how many.

        Keys under a master key that is not configured stay and are reported by
        :class:`MasterKeyError`. Safe to run again and beside writers: each key is
        replaced only if it is still the one read.
        """
        done = 0
        masters = self._masters()
        async with self._pool.connection() as conn:
            while True:
                rows = await key_store.keys_not_under(conn, self.master.id, limit=batch)
                if not rows:
                    break
                for user_id, key_id, wrapped in rows:
                    old = masters.get(key_id)
                    if old is None:
                        raise MasterKeyError(
                            f"user {user_id}: data key under master key {key_id}; set that key"
                            " as OWNSONA_MASTER_KEY_PREVIOUS to rotate it"
                        )
                    data_key = envelope.unwrap(old, user_id, wrapped)
                    new = envelope.wrap(self.master, user_id, data_key)
                    if await key_store.rewrap(conn, user_id, key_id, self.master.id, new):
                        done += 1
                if progress is not None:
                    progress(done)
            await key_store.retire_check_values(conn, self.master.id)
        return done
