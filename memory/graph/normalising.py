"""Normalising relations from elsewhere (the llm extractor) into the rules' canonical form."""

from __future__ import annotations

import re

from .edges import USER, Relation, alias, valid
from .entities import FIRST_PERSON
from .roles import ROLE_WORDS, ROLES, read_role
from .sentences import normalise_text

_PREDICATE_FIXES = {
    "is manager of": "manages",
    "manager of": "manages",
    "is the manager of": "manages",
    "is boss of": "manages",
    "boss of": "manages",
    "is married to": "married to",
    "lives in": "lives in",
    "works for": "works at",
    "is employed at": "works at",
    "is employed by": "works at",
}


def normalise_entity(text: str) -> str:
    """First person -> ``the user``; ``my X`` -> ``the user's X`` (canonical role noun)."""
    value = " ".join(normalise_text(text).split()).strip(" .,;:\"'")
    low = value.lower()
    if low in FIRST_PERSON:
        return USER
    m = re.match(r"(?:my|our|the user's)\s+(.+)$", value, re.I)
    if m:
        noun, used = read_role(m.group(1).lower().split())
        if noun is not None and used == len(m.group(1).split()):
            return alias(USER, noun)
        return alias(USER, m.group(1).lower())
    return value


def normalise_predicate(text: str) -> str:
    value = " ".join(text.split()).strip(" .,;:\"'").lower()
    value = _PREDICATE_FIXES.get(value, value)
    if value.startswith("is ") and value.endswith(" of"):
        noun = ROLE_WORDS.get(value[3:-3].removeprefix("the ").strip())
        if noun is not None:
            return ROLES[noun].predicate
    if value.endswith(" of"):
        noun = ROLE_WORDS.get(value[:-3])
        if noun is not None:
            return ROLES[noun].predicate
    return value


def normalise(relation: Relation) -> Relation | None:
    """A relation from outside the rules in our canonical form, or None if unusable."""
    out = Relation(
        normalise_entity(relation.subject),
        normalise_predicate(relation.predicate),
        normalise_entity(relation.object),
    )
    return out if valid(out) else None
