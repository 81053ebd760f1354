"""Contradictions the graph can see: two memories giving one functional slot different values.

A *slot* is what a fact is about: a subject and a single-valued attribute
("where the user lives", "Dana's birthday", "the user's partner"). Several
predicates fill the same slot: ``lives in`` and ``moved to``; ``car`` ("my
car is ...") and ``drives``; ``birthday`` and ``born on``; every partner role
(``wife of``, ``partner of``, ``married to``, ...). Two memories conflict when
they fill one slot and no value of one matches a value of the other.

Which predicates are single-valued (functional), and why:

- functional: where someone lives (``lives in``, ``moved to``), works
  (``works at``) and studies (``studies at``); their car (``car``, ``drives``:
  "my car is X" names *the* car one drives); their partner (one slot for
  spouse, wife, husband, partner, boyfriend, girlfriend, fiance, married to,
  engaged to, dating); mother and father; birthday and birth date, birthplace,
  age, name, hometown, nationality, blood type, star sign; and every
  ``favorite X`` (one slot per X: colour and food are different slots).
- not functional (never a conflict, however many values): ``owns`` (a car
  and a bike), ``allergic to`` (peanuts and shellfish), likes, loves,
  speaks, plays, ``studies`` (a subject), ``works as`` (people hold two
  jobs), friends, children, siblings, pets, and everything else.

Values match when, once lowercased with articles, possessives and
punctuation gone, the words of one are all among the words of the other
("Honda Civic" matches "a red 2019 Honda Civic"; "Acme" matches "Acme
Corp"), or, for dates, when they name the same month and day ("March 3",
"3rd of March", "03/03" does not parse and is compared as words). Pure:
standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .edges import USER, Relation, key
from .roles import ROLES

#: Predicate -> slot name, where the subject is the slot's owner and the object its value.
_SUBJECT_SLOTS: dict[str, str] = {
    "lives in": "lives in",
    "moved to": "lives in",
    "relocated to": "lives in",
    "resides in": "lives in",
    "based in": "lives in",
    "works at": "works at",
    "works for": "works at",
    "employed at": "works at",
    "employed by": "works at",
    "studies at": "studies at",
    "car": "car",
    "drives": "car",
    "birthday": "birthday",
    "born on": "birthday",
    "date of birth": "birthday",
    "born in": "born in",
    "age": "age",
    "named": "name",
    "name": "name",
    "hometown": "hometown",
    "nationality": "nationality",
    "blood type": "blood type",
    "star sign": "star sign",
    "married to": "partner",
    "engaged to": "partner",
    "dating": "partner",
}
#: Role predicates ``(holder, <role> of, owner)`` whose holder is the owner's one value.
_ROLE_SLOTS: dict[str, str] = {
    **{
        ROLES[noun].predicate: "partner"
        for noun in ("wife", "husband", "spouse", "partner", "boyfriend", "girlfriend", "fiance")
    },
    ROLES["mother"].predicate: "mother",
    ROLES["father"].predicate: "father",
}
#: Symmetric partner predicates: either end is the other's partner.
_SYMMETRIC = frozenset({"married to", "engaged to"})
_FAVOURITE = re.compile(r"^(?:favou?rite|preferred)\s+([a-z][a-z -]*)$")
_DATE_SLOTS = frozenset({"birthday"})

_MONTHS = {
    m[:3]: i + 1
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ]
    )
}
_MONTH_RE = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DAY_RE = r"(\d{1,2})(?:st|nd|rd|th)?"
_MONTH_DAY = re.compile(rf"\b{_MONTH_RE}\s+(?:the\s+)?{_DAY_RE}\b")
_DAY_MONTH = re.compile(rf"\b{_DAY_RE}\s+(?:of\s+)?{_MONTH_RE}")
_ISO_DATE = re.compile(r"\b\d{4}-(\d{2})-(\d{2})\b")
_NOISE = frozenset({"a", "an", "the", "my", "our", "his", "her", "their", "on", "in", "at", "of"})


@dataclass(frozen=True)
class Slot:
    """What a fact is about: its owner (an entity key) and a single-valued attribute."""

    owner: str
    name: str


def slot_of(relation: Relation) -> list[tuple[Slot, str]]:
    """The functional slots ``relation`` fills, each with its value; empty if none."""
    predicate = " ".join(relation.predicate.lower().split())
    favourite = _FAVOURITE.match(predicate.replace("colour", "color").replace("flavour", "flavor"))
    if favourite is not None:
        thing = favourite.group(1).strip()
        return [(Slot(key(relation.subject), "favorite " + thing), relation.object)]
    name = _SUBJECT_SLOTS.get(predicate)
    if name is not None:
        out = [(Slot(key(relation.subject), name), relation.object)]
        if predicate in _SYMMETRIC:
            out.append((Slot(key(relation.object), name), relation.subject))
        return out
    name = _ROLE_SLOTS.get(predicate)
    if name is not None:
        return [(Slot(key(relation.object), name), relation.subject)]
    return []


def is_functional(predicate: str) -> bool:
    """Whether a predicate fills a single-valued slot (so two values of it conflict)."""
    return bool(slot_of(Relation(USER, predicate, "x")))


#: LIKE patterns matching every functional predicate (for the store to select edges by).
FUNCTIONAL_PATTERNS: tuple[str, ...] = (
    *sorted({*_SUBJECT_SLOTS, *_ROLE_SLOTS}),
    "favorite %",
    "favourite %",
    "preferred %",
)


def _date(value: str) -> tuple[int, int] | None:
    text = value.lower()
    m = _ISO_DATE.search(text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _MONTH_DAY.search(text)
    if m:
        return _MONTHS[m.group(1)], int(m.group(2))
    m = _DAY_MONTH.search(text)
    if m:
        return _MONTHS[m.group(2)], int(m.group(1))
    return None


def _words(value: str) -> frozenset[str]:
    text = re.sub(r"'s\b", "", value.lower())
    return frozenset(w for w in re.findall(r"[\w]+", text) if w not in _NOISE)


def values_match(slot: str, a: str, b: str) -> bool:
    """Whether two values of one slot say the same thing (see the module docstring)."""
    if slot in _DATE_SLOTS:
        da, db = _date(a), _date(b)
        if da is not None and db is not None:
            return da == db
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return True  # nothing left to compare: never call it a contradiction
    return wa <= wb or wb <= wa


#: Memories compared per slot (the newest): a slot holds a few, and pairs grow as their square.
MAX_SLOT_MEMORIES = 200


@dataclass(frozen=True)
class SlotConflict:
    """Two memories that give one slot values that do not match."""

    first: int
    second: int
    slot: Slot


def conflicts(facts: Iterable[tuple[int, Relation]]) -> list[SlotConflict]:
    """Every pair of memories (low id first) whose relations fill a slot with unmatched values.

    ``facts``: ``(memory id, relation)``. Values from one memory are never
    compared with each other; two memories conflict on a slot when no value of
    one matches any value of the other. A pair conflicting on several slots
    is reported once, for its first slot in sorted order. A slot compares its
    newest ``MAX_SLOT_MEMORIES`` memories (highest ids).
    """
    values: dict[Slot, dict[int, list[str]]] = {}
    # Newest first: a crowded slot keeps its newest memories.
    for memory_id, relation in sorted(facts, key=lambda f: -f[0]):
        for slot, value in slot_of(relation):
            if slot.owner == key(value):
                continue
            held = values.setdefault(slot, {})
            if memory_id in held or len(held) < MAX_SLOT_MEMORIES:
                held.setdefault(memory_id, []).append(value)
    found: dict[tuple[int, int], SlotConflict] = {}
    for slot in sorted(values, key=lambda s: (s.owner, s.name)):
        by_memory = sorted(values[slot].items())
        for i, (a, va) in enumerate(by_memory):
            for b, vb in by_memory[i + 1 :]:
                if (a, b) in found:
                    continue
                if not any(values_match(slot.name, x, y) for x in va for y in vb):
                    found[(a, b)] = SlotConflict(a, b, slot)
    return sorted(found.values(), key=lambda c: (c.first, c.second))
