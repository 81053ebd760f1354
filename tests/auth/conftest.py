"""Fixtures for auth tests: settings and a loaded key store on a clean database."""

from __future__ import annotations

import pytest

from auth.keys import KeyStore
from config.settings import Settings


@pytest.fixture
def settings() -> Settings:
    return Settings(public_url="https://mem.example")


@pytest.fixture
async def keystore(pool, clean_db, settings) -> KeyStore:
    store = KeyStore(pool, access_token_ttl_s=settings.access_token_ttl_s)
    await store.load()
    return store


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
