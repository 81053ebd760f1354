"""REDIS_URL read as redis-py reads it, so a bad one fails at start-up, naming the variable."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import SplitResult, parse_qs, urlsplit

from config.env import SettingsError

#: redis-py's ssl_cert_reqs values in a URL.
_REDIS_CERT_REQS = ("none", "optional", "required")


def check_redis_url(url: str) -> None:
    """The scheme, port, database number and TLS options of REDIS_URL, or SettingsError."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise SettingsError("REDIS_URL", "must be a redis://, rediss:// or unix:// URL")
    _check_port("REDIS_URL", parts)
    database = parts.path.strip("/")
    if parts.scheme != "unix" and database and not database.isdigit():
        raise SettingsError("REDIS_URL", f"the path is a database number, got {parts.path!r}")
    query = parse_qs(parts.query)
    # redis-py hands ssl_* options to a plain connection too, which then fails on connect.
    tls_options = sorted(key for key in query if key.startswith("ssl_"))
    if tls_options and parts.scheme != "rediss":
        raise SettingsError("REDIS_URL", f"{tls_options[0]} needs a rediss:// (TLS) URL")
    for reqs in query.get("ssl_cert_reqs", []):
        if reqs not in _REDIS_CERT_REQS:
            raise SettingsError(
                "REDIS_URL",
                f"ssl_cert_reqs must be one of {', '.join(_REDIS_CERT_REQS)}, got {reqs!r}",
            )
    for option in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
        for path in query.get(option, []):
            if not Path(path).is_file():
                raise SettingsError("REDIS_URL", f"{option} names no readable file: {path!r}")


def _check_port(variable: str, parts: SplitResult) -> None:
    try:
        _ = parts.port  # urllib parses the port only when asked, and raises for a bad one
    except ValueError:
        raise SettingsError(variable, "has a port that is not a number") from None
