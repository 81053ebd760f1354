"""Latest truth first: recalled memories about one thing that disagree, the freshest first.

Recall orders matches by relevance (:mod:`memory.rules.ranking`). When some of
them are about the same thing and say different things ("I live in Lisbon",
then "I moved to Berlin"), relevance alone can put the older fact first, and a
model reading the list top down answers with it. This module reorders such
matches: within each group of disagreeing candidates, the freshest one takes the
place of the group's best-ranked member, and the others follow in their own
order. Markers say what changed: each older member lists the fresher returned
matches it disagrees with (``older_than``).

Who disagrees is decided elsewhere (the relation graph's functional slots,
``downweights`` records, near-duplicates with different values: see
:func:`values_differ`); this module only orders. Freshness is the contract's
contradiction rule (the chapter's recall section): ``last_confirmed_at``, then
``updated_at``, then ``created_at``, newest first.

The freshest member of a group may come from below the returned ``limit``
(the candidate pool is several times larger): it is pulled up to the group's
place and the list's last match drops out, so the newest value is never
hidden behind an older one. Scores are untouched: ``score`` stays the raw
cosine. Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Generic, TypeVar

from .event_dates import MONTH_NUMBER, WEEKDAYS

K = TypeVar("K", bound=Hashable)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def freshness(
    last_confirmed_at: datetime | None, updated_at: datetime | None, created_at: datetime | None
) -> tuple[float, float, float]:
    """The contract's order for contradictions, as a sortable key (larger is fresher)."""

    def ts(value: datetime | None) -> float:
        return (value or _EPOCH).timestamp()

    return ts(last_confirmed_at), ts(updated_at), ts(created_at)


@dataclass(frozen=True)
class Reordered(Generic[K]):
    """The matches to return, in order, and what each older one is older than."""

    order: list[K]
    #: A returned match -> the fresher returned matches it disagrees with (ascending).
    older_than: dict[K, list[K]] = field(default_factory=dict)
    #: The returned matches that were moved up to their group's place.
    promoted: frozenset[K] = frozenset()


def latest_first(
    ranked: Sequence[K],
    fresh: Mapping[K, tuple[float, float, float]],
    disagree: Iterable[tuple[K, K]],
    *,
    limit: int,
) -> Reordered[K]:
    """The first ``limit`` of ``ranked`` with each disagreeing group's freshest member first.

    ``ranked``: every candidate in relevance order (more than ``limit``);
    ``fresh``: each candidate's :func:`freshness`; ``disagree``: pairs of
    candidates that say different things about one thing (pairs naming a key
    outside ``ranked`` are ignored). Groups are the connected pairs. A group
    whose members all rank below ``limit`` changes nothing.
    """
    position = {k: i for i, k in enumerate(ranked)}
    parent: dict[K, K] = {}

    def root(k: K) -> K:
        while parent.get(k, k) != k:
            parent[k] = parent.get(parent[k], parent[k])
            k = parent[k]
        return k

    edges: dict[K, set[K]] = {}
    for a, b in disagree:
        if a == b or a not in position or b not in position:
            continue
        edges.setdefault(a, set()).add(b)
        edges.setdefault(b, set()).add(a)
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
    freshest: dict[K, K] = {}
    for k in edges:
        g = root(k)
        best = freshest.get(g)
        # Fresher wins; on equal freshness the better-ranked one.
        if best is None or (fresh[k], -position[k]) > (fresh[best], -position[best]):
            freshest[g] = k

    order: list[K] = []
    emitted: set[K] = set()
    promoted: set[K] = set()
    for k in ranked:
        if len(order) >= limit:
            break
        if k in emitted:
            continue
        if k in edges:
            head = freshest[root(k)]
            if head not in emitted and head != k:
                order.append(head)
                emitted.add(head)
                promoted.add(head)
                if len(order) >= limit:
                    break
        order.append(k)
        emitted.add(k)

    older_than: dict[K, list[K]] = {}
    for k in order:
        newer = [j for j in edges.get(k, ()) if j in emitted and fresh[j] > fresh[k]]
        if newer:
            older_than[k] = sorted(newer, key=lambda j: position[j])
    return Reordered(order, older_than, frozenset(promoted))


# --- near-duplicates that differ in a value ----------------------------------

_NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "once",
        "twice",
        "none",
        "no",
    ]
)
#: Month and day names: dates, left out of both values and words.
_MONTHS = frozenset(MONTH_NUMBER) | frozenset(WEEKDAYS)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "it",
        "its",
        "they",
        "them",
        "their",
        "his",
        "her",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "have",
        "has",
        "had",
        "do",
        "does",
        "did",
        "not",
        "so",
        "very",
        "just",
        "also",
        "now",
        "still",
        "too",
    ]
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'.-]*[A-Za-z0-9]|[A-Za-z0-9]")
_YEAR = re.compile(r"(?:19|20)[0-9]{2}")
_DAY = re.compile(r"[0-9]{1,2}(?:st|nd|rd|th)?")


#: Texts whose parts are remembered: recall compares the same candidates again and again.
PARTS_CACHE = 8192
#: Texts longer than this are passages, not one fact told twice: never compared.
FACT_CHARS = 2000


@lru_cache(maxsize=PARTS_CACHE)
def _cached_parts(text: str) -> tuple[frozenset[str], frozenset[str]]:
    return _split(text)


def _split(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(values, other content words) of a text, lowercased.

    Values are the amounts a fact states: numbers (digits, number words, clock
    times). Dates are left out altogether (years, month and day names): two
    texts that differ only in when something happened tell of two events
    ("I ran the Berlin half marathon in 2019" / "in 2023"), not of one changed
    fact. Names are content words, so the same statement about two people is
    two facts ("My friend Maren lives in Oslo" / "My friend Tobias lives in
    Munich").
    """
    values: set[str] = set()
    words: set[str] = set()
    tokens = [m.group(0).rstrip(".").lower() for m in _WORD.finditer(text)]
    for i, low in enumerate(tokens):
        if low in _MONTHS or _YEAR.fullmatch(low):
            continue
        beside = tokens[i - 1 : i] + tokens[i + 1 : i + 3]  # "3 March", "March the 3rd"
        if _DAY.fullmatch(low) and any(t in _MONTHS for t in beside):
            continue
        if any(ch.isdigit() for ch in low) or low in _NUMBER_WORDS:
            values.add(low)
        elif low not in _STOP:
            words.add(low)
    return frozenset(values), frozenset(words)


#: Share of content words two texts must have in common to be about the same thing.
SAME_TOPIC = 0.75


def values_differ(a: str, b: str) -> bool:
    """Whether two similar texts state the same kind of fact with different values.

    Each must hold an amount the other lacks ("two kids" / "three kids"; "5 km"
    / "10 km"; "6am" / "7:30am"), and their other content words must mostly
    agree (a Jaccard share of at least ``SAME_TOPIC``, names included). One
    text adding detail to the other ("Elm Street" / "Elm Street, Room 4") is
    not a disagreement, nor is a difference in wording, in dates (two events)
    or in names alone (two people: the relation slots of ``find_conflicts``
    catch "I work at Acme" / "I work at Globex"). Texts over ``FACT_CHARS`` are
    passages, never compared (which also bounds the cost).
    """
    if len(a) > FACT_CHARS or len(b) > FACT_CHARS:
        return False
    va, wa = _cached_parts(a)
    vb, wb = _cached_parts(b)
    if not (va - vb) or not (vb - va):
        return False
    union = wa | wb
    if not union:
        return True
    return len(wa & wb) / len(union) >= SAME_TOPIC
