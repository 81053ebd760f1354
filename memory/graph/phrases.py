"""Subjects and objects: the entity phrases a clause of the rules extractor names."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .edges import MAX_ENTITY_CHARS, USER, Relation, alias
from .roles import LONGEST_ROLE, NOT_CURRENT, ROLE_WORDS, ROLES, read_role
from .sentences import NAME_RE, NOT_NAMES, restore

_OBJECT_STOP = re.compile(
    r"\s+(?:as|since|because|with|when|while|where|who|whom|whose|which|that|and|but|or|until|till|"
    r"from|for|during|in|on|at|near|by|every|each|after|before|so|although|though|if|to|about|than|"
    r"like|including|except|whenever|unless|back|too|nowadays|these|this|again|last|next|"
    r"yesterday|recently|earlier|ago)\b|\s*[,;:!?()\[\]\"]|\s+-\s+"
)
#: Objects that only point back at something said before: no entity of their own (A-Z).
_PRONOUN_OBJECTS = frozenset(
    [
        "a",
        "all",
        "any",
        "anything",
        "everything",
        "her",
        "here",
        "him",
        "it",
        "lot",
        "lots",
        "nothing",
        "one",
        "some",
        "something",
        "stuff",
        "that",
        "them",
        "there",
        "these",
        "things",
        "this",
        "those",
    ]
)


@dataclass
class Context:
    """What earlier sentences of the same memory settled (pronoun antecedents)."""

    person: str | None = None


@dataclass
class Subject:
    """A clause's subject: its entities, the text after it, and edges its phrase implies."""

    entities: list[str]
    rest: str
    #: (owner, role) when the subject is an unnamed role holder ("My manager ...").
    role_of: tuple[str, str] | None = None
    extra: list[Relation] = field(default_factory=list)
    is_person: bool = False


def clean_entity(text: str) -> str:
    """An entity as stored: periods restored, edge punctuation and extra spaces gone."""
    text = restore(text).strip(" \t,;:\"'")
    return " ".join(text.split())


def role_edge(holder: str, noun: str, owner: str) -> Relation:
    """The edge recording that ``holder`` holds role ``noun`` toward ``owner``."""
    role = ROLES[noun]
    if role.holder_is_subject:
        return Relation(holder, role.predicate, owner)
    return Relation(owner, role.predicate, holder)


def read_names(text: str) -> list[str] | None:
    """``Ana``, ``Ana and Ben``, ``Ana, Ben and Cy``: the names, when that is all there is."""
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+|\s*&\s*", text.strip())
    names = []
    for part in parts:
        part = part.strip()
        if not re.fullmatch(NAME_RE, part) or part.split()[0] in NOT_NAMES:
            return None
        names.append(clean_entity(part))
    return names or None


def _read_role_possessive(words: list[str]) -> tuple[str | None, int]:
    """Like :func:`read_role`, also accepting a trailing ``'s`` on the last role word."""
    lowered = [w.lower() for w in words]
    noun, used = read_role(lowered)
    if noun is not None:
        return noun, used
    for i, w in enumerate(lowered[: LONGEST_ROLE + 3]):
        if w.endswith("'s"):
            trial = lowered[:i] + [w[:-2]]
            noun, used = read_role(trial)
            if noun is not None and used == len(trial):
                return noun, -(i + 1)  # negative: consumed through a possessive
    return None, 0


def owner_chain(text: str, ctx: Context) -> tuple[str, str] | None:
    """Read a possessor and any chain of possessive roles: returns (owner, remaining text)."""
    m = re.match(r"(my|our|(?:the\s+)?user's)\s+(.*)$", text, re.I)
    if m:
        owner, rest = USER, m.group(2)
    else:
        m = re.match(r"(his|her)\s+(.*)$", text, re.I)
        if m:
            if ctx.person is None:
                return None
            owner, rest = ctx.person, m.group(2)
        else:
            m = re.match(rf"({NAME_RE})'s\s+(.*)$", text)
            if not m or m.group(1).split()[0] in NOT_NAMES:
                return None
            owner, rest = clean_entity(m.group(1)), m.group(2)
    while True:
        words = rest.split()
        noun, used = _read_role_possessive(words)
        if noun is None or used >= 0:
            return owner, rest
        owner = alias(owner, noun)
        rest = " ".join(words[-used:])


def role_phrase(text: str) -> tuple[str | None, str, bool]:
    """A role noun at the start of text -> (noun, remaining text, is_current)."""
    words = text.split()
    lowered = [w.lower().rstrip(",") for w in words]
    if (
        lowered
        and lowered[0] in NOT_CURRENT
        or (lowered and lowered[0].startswith("ex-") and lowered[0] not in ROLE_WORDS)
    ):
        return None, text, False
    noun, used = read_role(lowered)
    if noun is None:
        return None, text, True
    # Keep a comma that followed the role word (an appositive: "My manager, Dana, ...").
    last = words[used - 1]
    rest = " ".join(words[used:])
    if last.endswith(","):
        rest = ", " + rest
    return noun, rest, True


def read_subject(clause: str, ctx: Context) -> Subject | None:
    """Who a clause is about and what it goes on to say, or None when it names no one."""
    m = re.match(r"(I|[Ww]e)\b\s*(.*)$", clause)
    if m:
        return Subject([USER], m.group(2))
    m = re.match(r"(?:the\s+)?user\b\s*(?!'s)(.*)$", clause, re.I)
    if m:
        return Subject([USER], m.group(1))
    m = re.match(r"(he|she)\b\s*(.*)$", clause, re.I)
    if m:
        if ctx.person is None:
            return None
        return Subject([ctx.person], m.group(2), is_person=True)
    chain = owner_chain(clause, ctx)
    if chain is not None:
        owner, rest = chain
        noun, rest, current = role_phrase(rest)
        if noun is None:
            return None
        if not current:
            return Subject([], rest)  # "my former manager": nothing current to record
        m = re.match(rf",?\s*({NAME_RE})(?:\s*,)?\s*(.*)$", rest)
        if m and m.group(1).split()[0] not in NOT_NAMES:
            name = clean_entity(m.group(1))
            return Subject([name], m.group(2), extra=[role_edge(name, noun, owner)], is_person=True)
        return Subject(
            [alias(owner, noun)],
            rest.lstrip(", "),
            role_of=(owner, noun),
            is_person=noun != "employer",
        )
    m = re.match(rf"({NAME_RE}(?:(?:\s*,\s*|\s+and\s+|\s*&\s*){NAME_RE})*)\s+(.*)$", clause)
    if m and m.group(1).split()[0] not in NOT_NAMES:
        names = read_names(m.group(1))
        if names:
            return Subject(names, m.group(2), is_person=True)
    return None


def read_object(text: str, ctx: Context, *, article: bool = True) -> tuple[str | None, str]:
    """The object phrase at the start of text -> (entity or None, what follows it)."""
    m = _OBJECT_STOP.search(text)
    phrase, rest = (text[: m.start()], text[m.start() :]) if m else (text, "")
    phrase = phrase.strip()
    if not article:
        phrase = re.sub(r"^(?:an?|one)\s+", "", phrase, flags=re.I)
    low = phrase.lower()
    if low in ("me", "myself", "us", "the user"):
        return USER, rest
    if not phrase or low in _PRONOUN_OBJECTS or not re.search(r"\w", phrase):
        return None, rest
    chain = owner_chain(phrase, ctx) if re.match(r"(?:my|our|his|her)\s", low) else None
    if chain is None and re.match(r"(?:his|her|their|your)\s", low):
        return None, rest  # a possessive pronoun with no antecedent
    if chain is not None:
        owner, after = chain
        noun, after2, current = role_phrase(after)
        if noun is not None and current and not after2.strip(" ,"):
            return alias(owner, noun), rest
        if not after.strip():
            return None, rest
        return alias(owner, after.strip().lower()), rest
    if len(phrase.split()) > 6 or len(phrase) > MAX_ENTITY_CHARS:
        return None, rest
    return clean_entity(phrase), rest


def read_objects(text: str, ctx: Context) -> tuple[list[str], str]:
    """``sushi, ramen and tacos``: several objects joined by commas and ``and``."""
    found: list[str] = []
    rest = text
    while True:
        obj, rest = read_object(rest, ctx)
        if obj is None:
            break
        found.append(obj)
        m = re.match(r"\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s+&\s+)(?!(?:I|we|he|she|my|our)\b)", rest)
        if not m:
            break
        rest = rest[m.end() :]
    return found, rest
