"""Redis Sentinel settings: where the broker finds its master (issue 29, item 3).

``REDIS_SENTINELS`` lists the Sentinels (``host:port``, comma-separated) and
``REDIS_SENTINEL_MASTER`` names the master they watch. The master's own
password, database number and TLS options still come from ``REDIS_URL``, the
usual place (its host and port are then unused: the Sentinels give the
address); ``REDIS_SENTINEL_PASSWORD`` is the Sentinels' own ``requirepass``,
when they have one. Kept apart from :mod:`config.settings` so that the block
that reads it stays one call there.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from config.env import Env, SettingsError

#: What a master name may look like: Sentinel takes any word, we refuse spaces and separators.
_MASTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


@dataclass(frozen=True)
class RedisSentinel:
    """The Sentinels to ask and the name of the master they watch."""

    #: (host, port) of each Sentinel, in the order given.
    sentinels: tuple[tuple[str, int], ...]
    #: The master's name in the Sentinels' configuration (``sentinel monitor <name> ...``).
    master: str
    #: The Sentinels' own password (their ``requirepass``); None: they have none.
    password: str | None = None

    def describe(self) -> str:
        """For messages and logs: the master's name and the Sentinels' addresses (no password)."""
        where = ", ".join(f"{host}:{port}" for host, port in self.sentinels)
        return f"master {self.master!r} through the Sentinels at {where}"


def read_redis_sentinel(env: Env, redis_url: str | None) -> RedisSentinel | None:
    """REDIS_SENTINELS, REDIS_SENTINEL_MASTER and REDIS_SENTINEL_PASSWORD, checked; None when
    REDIS_SENTINELS is unset (then the other two must be unset as well)."""
    raw = env.text("REDIS_SENTINELS")
    master = env.text("REDIS_SENTINEL_MASTER")
    password = env.text("REDIS_SENTINEL_PASSWORD")
    if raw is None:
        for name, value in (
            ("REDIS_SENTINEL_MASTER", master),
            ("REDIS_SENTINEL_PASSWORD", password),
        ):
            if value is not None:
                raise SettingsError(name, "is set but REDIS_SENTINELS is not")
        return None
    sentinels = tuple(_address(item) for item in raw.split(",") if item.strip())
    if not sentinels:
        raise SettingsError("REDIS_SENTINELS", "lists no Sentinel (host:port, comma-separated)")
    if len(set(sentinels)) != len(sentinels):
        raise SettingsError("REDIS_SENTINELS", "lists the same Sentinel twice")
    if master is None:
        raise SettingsError("REDIS_SENTINEL_MASTER", "is required with REDIS_SENTINELS")
    if not _MASTER_NAME.match(master):
        raise SettingsError(
            "REDIS_SENTINEL_MASTER",
            f"must be the master's name as the Sentinels know it (letters, digits, . _ -), "
            f"got {master!r}",
        )
    if redis_url is not None and urlsplit(redis_url).scheme == "unix":
        raise SettingsError(
            "REDIS_URL",
            "with REDIS_SENTINELS it gives the master's password, database and TLS options "
            "(redis:// or rediss://), not a unix:// socket",
        )
    return RedisSentinel(sentinels=sentinels, master=master, password=password)


def _address(item: str) -> tuple[str, int]:
    item = item.strip()
    host, sep, port_text = item.rpartition(":")
    host = host.strip("[]")  # an IPv6 literal: [::1]:26379
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise SettingsError(
            "REDIS_SENTINELS", f"must list host:port addresses, comma-separated, got {item!r}"
        )
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_NAME.match(host):
            raise SettingsError("REDIS_SENTINELS", f"{host!r} is not a host name") from None
    return host, int(port_text)
