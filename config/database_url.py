"""``DATABASE_URL`` and ``DATABASE_REPLICA_URLS`` read the way libpq reads them.

The check goes through :func:`psycopg.conninfo.conninfo_to_dict`, which calls
libpq's own parser (``PQconninfoParse``), so both of libpq's multi-host forms
pass as libpq takes them: ``postgresql://u@h1:5432,h2:5432/db`` and
``postgresql://u@/db?host=h1,h2&port=5432,5432``. Python's URL parser would
refuse the first one (issue 29). On top of the parser we check what libpq
only finds out when it connects: that every port is a number, that the ports
match the hosts, and the values of ``sslmode`` and ``target_session_attrs``.

A message never quotes the password: libpq's own messages can echo a part of
the URL, so the password is scrubbed from them.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from config.env import SettingsError

#: libpq's sslmode values (PostgreSQL docs, "Protection Provided in Different Modes").
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
#: libpq's target_session_attrs values (PostgreSQL docs, "Parameter Key Words").
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
#: The values that guarantee a writable server among several hosts.
WRITABLE_ATTRS = ("read-write", "primary")

_USERINFO_PASSWORD = re.compile(r"^[a-z]+://[^:/@]*:([^@/]*)@", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"[?&]password=([^&]*)", re.IGNORECASE)


def check_database_url(variable: str, url: str, *, writable: bool) -> dict[str, str]:
    """The URL's connection parameters as libpq reads them; SettingsError naming ``variable``.

    ``writable`` (DATABASE_URL): several hosts must not be combined with a
    ``target_session_attrs`` that allows a standby, since writes would land on it.
    """
    if not url.lower().startswith(("postgres://", "postgresql://")):
        raise SettingsError(variable, "must be a postgres:// or postgresql:// URL")
    try:
        params = {key: str(value) for key, value in conninfo_to_dict(url).items()}
    except psycopg.ProgrammingError as ex:
        problem = _scrub(str(ex).strip().splitlines()[0] if str(ex).strip() else "", url)
        raise SettingsError(variable, f"libpq cannot read it: {problem or 'malformed'}") from None
    hosts = _split(params.get("host")) or _split(params.get("hostaddr"))
    ports = _split(params.get("port"))
    for port in ports:
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise SettingsError(
                variable, f"has a port that is not a number from 1 to 65535: {port!r}"
            )
    if len(ports) > 1 and len(ports) != max(len(hosts), 1):
        raise SettingsError(
            variable,
            f"names {len(hosts)} host(s) but {len(ports)} ports (one port, or one per host)",
        )
    if any(not host for host in hosts) and len(hosts) > 1:
        raise SettingsError(variable, "has an empty host in its host list")
    mode = params.get("sslmode")
    if mode is not None and mode not in SSLMODES:
        raise SettingsError(variable, f"sslmode must be one of {', '.join(SSLMODES)}, got {mode!r}")
    attrs = params.get("target_session_attrs")
    if attrs is not None and attrs not in SESSION_ATTRS:
        raise SettingsError(
            variable,
            f"target_session_attrs must be one of {', '.join(SESSION_ATTRS)}, got {attrs!r}",
        )
    if writable and len(hosts) > 1 and attrs is not None and attrs not in WRITABLE_ATTRS:
        raise SettingsError(
            variable,
            f"names several hosts with target_session_attrs={attrs}, which may pick a standby "
            "for writes; use read-write (the default when several hosts are named)",
        )
    return params


def host_count(params: dict[str, str]) -> int:
    """How many servers a parsed URL names (at least 1: no host means the default socket)."""
    return max(len(_split(params.get("host")) or _split(params.get("hostaddr"))), 1)


def _split(value: str | None) -> list[str]:
    return [] if value is None else [part.strip() for part in value.split(",")]


def _scrub(message: str, url: str) -> str:
    """``message`` without the URL's password (libpq may echo a part of the URL)."""
    matches = [_USERINFO_PASSWORD.match(url), *_QUERY_PASSWORD.finditer(url)]
    secrets = [m.group(1) for m in matches if m is not None]
    for secret in secrets:
        if secret:
            for form in {secret, unquote(secret)}:
                message = message.replace(form, "***")
    return message
