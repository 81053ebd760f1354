"""The graph's value types and the entity forms every other graph module shares."""

from __future__ import annotations

from dataclasses import dataclass

#: The entity every first-person word resolves to.
USER = "the user"
#: Longest subject or object kept, in characters.
MAX_ENTITY_CHARS = 200
#: Longest predicate kept, in characters.
MAX_PREDICATE_CHARS = 80


@dataclass(frozen=True)
class Relation:
    """One extracted ``(subject, predicate, object)`` edge."""

    subject: str
    predicate: str
    object: str


@dataclass(frozen=True)
class Edge:
    """A stored edge as traversal sees it."""

    id: int
    subject: str
    predicate: str
    object: str
    memory_id: int


def key(entity: str) -> str:
    """The matching form of an entity: case-insensitive, whitespace collapsed."""
    return " ".join(entity.split()).lower()


def alias(owner: str, noun: str) -> str:
    """The entity "<owner>'s <role>" used when a role's holder is not named."""
    return f"{owner}'s {noun}"


def owner_of(alias_key: str) -> str:
    """The owner an alias entity names ("dana's husband" -> "dana"); inverse of :func:`alias`."""
    return alias_key.rsplit("'s ", 1)[0]


def valid(relation: Relation) -> bool:
    """Whether an edge may be stored: printable, within the length limits, not a self-loop."""
    parts = (relation.subject, relation.predicate, relation.object)
    if any("\x00" in p or not p.isprintable() for p in parts):
        return False  # control characters (and NUL, which PostgreSQL text cannot hold)
    return (
        0 < len(relation.subject) <= MAX_ENTITY_CHARS
        and 0 < len(relation.object) <= MAX_ENTITY_CHARS
        and 0 < len(relation.predicate) <= MAX_PREDICATE_CHARS
        and key(relation.subject) != key(relation.object)
    )
