"""Entity phrases as a query names them: first person, role chains, plain names."""

from __future__ import annotations

from dataclasses import dataclass

from .edges import USER, key
from .roles import read_role
from .sentences import normalise_text

FIRST_PERSON = frozenset(
    {"i", "me", "myself", "mine", "my self", "the user", "user", "we", "us", "ourselves"}
)


@dataclass(frozen=True)
class EntityPath:
    """A queried entity: a base entity and a chain of roles ("my manager's husband")."""

    base: str
    roles: tuple[str, ...] = ()


def parse_entity(text: str) -> EntityPath:
    """Resolve a queried entity phrase: first person, role chains, or a plain name."""
    phrase = key(normalise_text(text)).strip(" .?!,;:\"'")
    if phrase in FIRST_PERSON:
        return EntityPath(USER)
    head, _, tail = phrase.partition(" ")
    if head in ("my", "our") and tail:
        base, chain = USER, tail
    elif phrase.startswith("the user's "):
        base, chain = USER, phrase[len("the user's ") :]
    elif "'s " in phrase:
        base, _, chain = phrase.partition("'s ")
    else:
        return EntityPath(phrase)
    roles: list[str] = []
    for part in chain.split("'s "):
        words = part.split()
        noun, used = read_role(words)
        if noun is None or used != len(words):
            roles.append(part)  # not a known role: matched only as an alias entity
        else:
            roles.append(noun)
    return EntityPath(key(base), tuple(roles))
