"""What a chat import's fact extractor is: its protocol, what it finds, how it fails.

The protocol lives with the providers (``fact_extractor`` implements it over
an OpenAI-compatible LLM); the chat import (``memory.chat_import``) and
``Deps`` only name it. Pure: no I/O, nothing built here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Protocol


class FactExtractionError(Exception):
    """The extractor failed on one conversation; its message holds no text and no key."""


@dataclass(frozen=True)
class Fact:
    """One fact an extractor found: its sentence, and the day it happened when the
    conversation fixes one (stored as the memory's occurred_at, issue 17)."""

    text: str
    day: date | None = None


class FactExtractor(Protocol):
    name: str

    async def extract(self, *, title: str, day: date | None, messages: list[str]) -> list[Fact]:
        """The user's durable facts; raises :class:`FactExtractionError`."""
        ...
