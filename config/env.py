"""Typed, validated reads of environment variables for :mod:`config.settings`."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from typing import TypeVar
from urllib.parse import urlsplit

_Number = TypeVar("_Number", int, float)


class SettingsError(ValueError):
    """A configuration variable has a bad value; the message names it."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


class Env:
    """Typed reads of environment variables; every failure names its variable."""

    _TRUE = frozenset({"1", "true", "yes", "on"})
    _FALSE = frozenset({"0", "false", "no", "off"})

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def text(self, name: str) -> str | None:
        value = self._environ.get(name)
        if value is None:
            return None
        value = value.strip()
        return value or None

    def integer(self, name: str, default: int, *, minimum: int, maximum: int) -> int:
        value = self.optional_integer(name, minimum=minimum, maximum=maximum)
        return default if value is None else value

    def optional_integer(self, name: str, *, minimum: int, maximum: int) -> int | None:
        return self._bounded(name, int, "a whole number", minimum, maximum)

    def number(self, name: str, default: float, *, minimum: float, maximum: float) -> float:
        value = self._bounded(name, float, "a number", minimum, maximum)
        return default if value is None else value

    def _bounded(
        self,
        name: str,
        parse: Callable[[str], _Number],
        what: str,
        minimum: _Number,
        maximum: _Number,
    ) -> _Number | None:
        """``name`` parsed and within ``minimum..maximum``, or None when unset."""
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = parse(raw)
        except ValueError:
            raise SettingsError(name, f"must be {what}, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise SettingsError(name, f"must be between {minimum} and {maximum}, got {value}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() in self._TRUE:
            return True
        if raw.lower() in self._FALSE:
            return False
        raise SettingsError(name, f"must be true or false, got {raw!r}")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() not in choices:
            raise SettingsError(name, f"must be one of {', '.join(choices)}, got {raw!r}")
        return raw.lower()

    def origins(self, name: str) -> tuple[str, ...]:
        """A comma-separated list of ``scheme://host[:port]`` origins."""
        found = []
        for item in self._items(name):
            parts = urlsplit(item)
            if (
                parts.scheme not in ("http", "https")
                or not parts.netloc
                or parts.path not in ("", "/")
            ):
                raise SettingsError(
                    name, f"must list origins such as https://app.example, got {item!r}"
                )
            if parts.query or parts.fragment:
                raise SettingsError(name, f"an origin has no query or fragment, got {item!r}")
            found.append(f"{parts.scheme}://{parts.netloc}")
        return tuple(found)

    def _items(self, name: str) -> list[str]:
        """The non-empty items of a comma-separated variable; none when it is unset."""
        raw = self.text(name)
        if raw is None:
            return []
        return [item for item in (part.strip() for part in raw.split(",")) if item]

    def proxies(self, name: str) -> tuple[str, ...]:
        """Comma-separated proxy addresses or networks (``10.0.0.0/8``), or ``*`` for any."""
        found = []
        for item in self._items(name):
            if item != "*":
                try:
                    ipaddress.ip_network(item, strict=False)
                except ValueError:
                    raise SettingsError(
                        name, f"must list proxy addresses or networks (or *), got {item!r}"
                    ) from None
            found.append(item)
        return tuple(found)

    def url(self, name: str, default: str) -> str:
        raw = self.text(name) or default
        try:
            parts = urlsplit(raw)
            port = parts.port  # raises for a port out of range or not a number
        except ValueError:
            raise SettingsError(name, f"must be an http:// or https:// URL, got {raw!r}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
            raise SettingsError(name, f"must be an http:// or https:// URL, got {raw!r}")
        if parts.query or parts.fragment:
            raise SettingsError(name, "must not carry a query or fragment")
        # Clients compare the issuer byte for byte (RFC 8414 §3.3): one canonical form.
        return raw.rstrip("/")
