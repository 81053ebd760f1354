"""The Origin policy on its own (pure)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from api.origins import OriginPolicy


def policy(public_url: str = "https://mem.example", **extra: Any) -> OriginPolicy:
    return OriginPolicy(SimpleNamespace(public_url=public_url, **extra))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),  # not a browser: nothing to check
        ("https://mem.example", True),
        ("https://MEM.example:443", True),  # same origin, spelled differently
        ("https://mem.example:8443", False),
        ("http://mem.example", False),
        ("http://localhost:6274", True),
        ("https://localhost", True),
        ("http://127.0.0.1:9", True),
        ("http://[::1]:3000", True),
        ("http://127.0.0.2", False),
        ("http://localhost.evil.com", False),
        ("null", False),
        ("file://", False),
        ("http://[bad", False),
        ("", False),
    ],
)
def test_origins(origin: str | None, allowed: bool) -> None:
    assert policy().allows(origin) is allowed


def test_public_url_with_a_port() -> None:
    assert policy("http://203.0.113.5:8000").allows("http://203.0.113.5:8000")
    assert not policy("http://203.0.113.5:8000").allows("http://203.0.113.5:8001")


def test_extra_origins_from_settings() -> None:
    # Honoured once Settings grows allowed_origins (OWNSONA_ALLOWED_ORIGINS).
    extended = policy(allowed_origins=("https://claude.ai", "https://chatgpt.com"))
    assert extended.allows("https://claude.ai")
    assert extended.allows("https://chatgpt.com")
    assert not policy().allows("https://claude.ai")
