"""Every Redis client of a process, built in one place: one address (REDIS_URL) or Sentinels.

With ``REDIS_SENTINELS`` the clients are redis-py's Sentinel-managed ones
(``Sentinel(...).master_for(name)``, sync and asyncio): each new connection
asks the Sentinels where the master is, and redis-py drops a connection
whose server answers ``READONLY`` (an old master that came back as a
replica) or unblocks a waiter because it was demoted, so the next command
reconnects to the new master. The broker, the results backend and the
write queue's asyncio results client all come from here, so they follow a
failover together (tests/tasks/test_sentinel_failover.py shows it).

With ``REDIS_URL`` alone nothing changes from before: ``Redis.from_url``.
In Sentinel mode ``REDIS_URL`` (optional) still gives the master's
password, database number and TLS options; its host and port are unused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio as aredis
import redis.asyncio.sentinel as asentinel
import redis.retry
import redis.sentinel
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.connection import parse_url

from config.redis_sentinel import RedisSentinel
from config.settings import Settings

#: Longest wait on one Sentinel: discovery (redis-py asks them in turn) moves on to the
#: next one after it. A Sentinel answers in a millisecond; a silent one costs this much
#: per new master connection (the readiness probe asks them concurrently instead:
#: tasks.redis_probe).
SENTINEL_TIMEOUT_S = 1.0


def no_retry() -> Retry:
    """One try per command: redis-py's default retries (3, with back-off: 4 s measured on a
    closed port) would hide inside our own deadlines and retries (issue 33, finding 2)."""
    return Retry(NoBackoff(), 0)


def no_retry_sync() -> redis.retry.Retry:
    """:func:`no_retry` for a blocking client (the broker's)."""
    return redis.retry.Retry(NoBackoff(), 0)


class RedisSettingsRefused(Exception):
    """The Redis settings name something that is not there (a master the Sentinels don't know)."""


class RedisNotWritable(Exception):
    """Redis answers, but a write sent now would be refused (the base of the two below)."""


class ReadOnlyReplica(RedisNotWritable):
    """The server at the address is a replica: ``ROLE`` says slave, writes answer READONLY."""


class NoMaster(RedisNotWritable):
    """The Sentinels know the master's name but have no master to give out (failover under way)."""


@dataclass(frozen=True)
class RedisTarget:
    """Where this process's Redis is: ``REDIS_URL``, or the Sentinels (and the URL's options)."""

    url: str | None = None
    sentinel: RedisSentinel | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisTarget | None:
        """The target the settings name; None without Redis (the in-process broker)."""
        if not settings.redis_configured:
            return None
        return cls(url=settings.redis_url, sentinel=settings.redis_sentinel)

    @classmethod
    def of(cls, value: RedisTarget | str | None) -> RedisTarget | None:
        """A target from a target or a bare URL (tests and older callers pass a URL)."""
        if value is None or isinstance(value, RedisTarget):
            return value
        return cls(url=value)

    @property
    def variable(self) -> str:
        """The setting an operator fixes when this target fails (for error messages)."""
        return "REDIS_SENTINELS" if self.sentinel is not None else "REDIS_URL"

    def describe(self) -> str:
        """Where Redis is, for logs: never the password."""
        if self.sentinel is not None:
            return self.sentinel.describe()
        parts = urlsplit(self.url or "")
        if parts.scheme == "unix":
            return f"unix socket {parts.path}"
        return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}{parts.path}"


def sync_client(target: RedisTarget, **options: Any) -> redis.Redis:
    """A blocking client of the master (the broker's and the results backend's)."""
    if target.sentinel is None:
        assert target.url is not None, "a target names a URL or Sentinels"
        return redis.Redis.from_url(target.url, **options)
    options_of_master = {**master_options(target.url), **options}
    sentinel = redis.sentinel.Sentinel(
        target.sentinel.sentinels,
        sentinel_kwargs=sentinel_options(target, options_of_master),
        **options_of_master,
    )
    client: redis.Redis = sentinel.master_for(target.sentinel.master)
    return client


def async_client(target: RedisTarget, **options: Any) -> aredis.Redis:
    """An asyncio client of the master (the write queue's results, the readiness probe)."""
    if target.sentinel is None:
        assert target.url is not None, "a target names a URL or Sentinels"
        return aredis.Redis.from_url(target.url, **options)
    options_of_master = {**master_options(target.url), **options}
    sentinel = asentinel.Sentinel(
        target.sentinel.sentinels,
        sentinel_kwargs=sentinel_options(target, options_of_master),
        **options_of_master,
    )
    client: aredis.Redis = sentinel.master_for(target.sentinel.master)
    return client


def check_sentinels(target: RedisTarget, *, timeout_s: float = 5.0) -> None:
    """At start-up: some Sentinel answers and knows the master's name.

    Raises :class:`RedisSettingsRefused` when the Sentinels that answer know no
    master of that name (a typo would otherwise look like an endless outage),
    ``redis.ConnectionError`` when none answers. Nothing to check without Sentinels.
    """
    if target.sentinel is None:
        return
    options = sentinel_options(
        target, {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s}
    )
    known: set[str] = set()
    answered = 0
    errors: list[str] = []
    for host, port in target.sentinel.sentinels:
        client = redis.Redis(host=host, port=port, **options)
        try:
            masters = client.sentinel_masters()
        except redis.RedisError as ex:
            errors.append(f"{host}:{port}: {type(ex).__name__}: {ex}")
            continue
        finally:
            client.close()
        answered += 1
        if target.sentinel.master in masters:
            return
        known.update(str(name) for name in masters)
    if not answered:
        raise redis.ConnectionError("no Sentinel answered (" + "; ".join(errors) + ")")
    raise RedisSettingsRefused(
        f"REDIS_SENTINEL_MASTER: the Sentinels ({answered} of "
        f"{len(target.sentinel.sentinels)} answered) know no master named "
        f"{target.sentinel.master!r}; they know: {_names(known)}"
    )


async def role_of(client: aredis.Redis) -> str:
    """``master`` or ``slave``: ROLE, else INFO replication's role, else (neither allowed)
    ``master`` once PING answers, as the check was before it asked."""
    try:
        role = await client.execute_command("ROLE")  # type: ignore[no-untyped-call]
        return role[0].decode() if isinstance(role[0], bytes) else str(role[0])
    except redis.ResponseError:
        pass  # renamed or disabled by a managed service, or a Redis look-alike without it
    try:
        info = await client.info("replication")
        return str(info.get("role", "master"))
    except redis.ResponseError:
        await client.ping()
        return "master"


def close_sync_client(client: redis.Redis) -> None:
    """Close a :func:`sync_client`: its connections, and those to the Sentinels."""
    client.close()
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    if manager is not None:
        for sentinel in manager.sentinels:
            sentinel.close()


async def close_async_client(client: aredis.Redis) -> None:
    """Close an :func:`async_client`: its connections, and those to the Sentinels."""
    await client.aclose()
    # A Sentinel-managed client's pool holds the Sentinel object, which holds its own clients.
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    if manager is not None:
        for sentinel in manager.sentinels:
            await sentinel.aclose()


def master_options(url: str | None) -> dict[str, Any]:
    """The master's password, database and TLS options from REDIS_URL (host and port dropped)."""
    if url is None:
        return {}
    options: dict[str, Any] = dict(parse_url(url))  # type: ignore[no-untyped-call]
    for unused in ("host", "port", "path", "connection_class"):
        options.pop(unused, None)
    if urlsplit(url).scheme == "rediss":
        options["ssl"] = True  # the Sentinel pool picks its TLS connection class from this
    return options


def sentinel_options(
    target: RedisTarget, options_of_master: dict[str, Any], *, cap_s: float = SENTINEL_TIMEOUT_S
) -> dict[str, Any]:
    """How to talk to the Sentinels: their own password, the master's timeouts (at most
    ``cap_s``) and TLS."""
    options = {
        key: value
        for key, value in options_of_master.items()
        if key in ("socket_keepalive", "ssl") or key.startswith("ssl_")
    }
    for timeout in ("socket_connect_timeout", "socket_timeout"):
        given = options_of_master.get(timeout)
        options[timeout] = cap_s if given is None else min(given, cap_s)
    if target.sentinel is not None and target.sentinel.password is not None:
        options["password"] = target.sentinel.password
    return options


def _names(names: Iterable[str]) -> str:
    found = sorted(names)
    return ", ".join(repr(name) for name in found) if found else "none"
