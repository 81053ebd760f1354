"""Roles: the nouns that name whoever holds a role toward an owner, and their edges.

A role edge records who holds a role with the role's predicate: "Dana is my
manager." -> ``(Dana, manages, the user)``, "Dana's husband is Lee." ->
``(Lee, husband of, Dana)``. A role whose holder is not named becomes the
alias entity ``the user's mother``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .edges import Edge, alias, key


@dataclass(frozen=True)
class Role:
    """A role noun and the edge that records who holds it."""

    noun: str
    predicate: str
    #: True: ``(holder, predicate, owner)``; False: ``(owner, predicate, holder)``.
    holder_is_subject: bool = True


def _of(noun: str, *synonyms: str) -> tuple[Role, tuple[str, ...]]:
    return Role(noun, f"{noun} of"), synonyms


_ROLE_TABLE: list[tuple[Role, tuple[str, ...]]] = [
    (
        Role("manager", "manages"),
        ("boss", "supervisor", "line manager", "team lead", "team leader"),
    ),
    (Role("direct report", "reports to"), ("report", "subordinate")),
    (Role("employer", "works at", holder_is_subject=False), ("company",)),
    _of("colleague", "coworker", "co-worker", "workmate"),
    _of("employee"),
    _of("mentor"),
    _of("mentee"),
    _of("client"),
    _of("assistant"),
    _of("wife"),
    _of("husband", "hubby"),
    _of("spouse"),
    _of("partner"),
    _of("boyfriend"),
    _of("girlfriend"),
    _of("fiance", "fiancé", "fiancee", "fiancée"),
    _of("ex-wife"),
    _of("ex-husband"),
    _of("ex-partner"),
    _of("ex-boyfriend"),
    _of("ex-girlfriend"),
    _of("son"),
    _of("daughter"),
    _of("child", "kid"),
    _of("stepson", "step-son"),
    _of("stepdaughter", "step-daughter"),
    _of("stepchild", "step-child"),
    _of("mother", "mom", "mum", "mommy", "mummy", "mama", "momma"),
    _of("father", "dad", "daddy", "papa"),
    _of("parent"),
    _of("stepmother", "stepmom", "stepmum", "step-mother"),
    _of("stepfather", "stepdad", "step-father"),
    _of("brother"),
    _of("sister", "sis"),
    _of("sibling"),
    _of("half-brother"),
    _of("half-sister"),
    _of("stepbrother", "step-brother"),
    _of("stepsister", "step-sister"),
    _of("twin"),
    _of("grandmother", "grandma", "granny", "nana", "gran"),
    _of("grandfather", "grandpa", "granddad", "grandad"),
    _of("grandparent"),
    _of("grandson"),
    _of("granddaughter"),
    _of("grandchild", "grandkid"),
    _of("aunt", "auntie", "aunty"),
    _of("uncle"),
    _of("cousin"),
    _of("niece"),
    _of("nephew"),
    _of("mother-in-law"),
    _of("father-in-law"),
    _of("brother-in-law"),
    _of("sister-in-law"),
    _of("son-in-law"),
    _of("daughter-in-law"),
    _of("godmother"),
    _of("godfather"),
    _of("godson"),
    _of("goddaughter"),
    _of("godchild"),
    _of("friend"),
    _of("best friend", "bestie", "closest friend"),
    _of("girlfriend"),
    _of("roommate", "flatmate", "housemate", "roomie"),
    _of("neighbor", "neighbour"),
    _of("classmate"),
    _of("teammate"),
    _of("teacher"),
    _of("tutor"),
    _of("coach"),
    _of("trainer", "personal trainer"),
    _of("student"),
    _of("doctor", "gp", "physician"),
    _of("dentist"),
    _of("therapist"),
    _of("psychiatrist"),
    _of("pediatrician", "paediatrician"),
    _of("vet", "veterinarian"),
    _of("lawyer", "attorney"),
    _of("accountant"),
    _of("landlord", "landlady"),
    _of("tenant"),
    _of("babysitter", "nanny"),
    _of("dog", "puppy"),
    _of("cat", "kitten"),
    _of("pet"),
    _of("horse"),
    _of("rabbit", "bunny"),
]

#: Canonical role noun -> Role.
ROLES: dict[str, Role] = {role.noun: role for role, _ in _ROLE_TABLE}

_IRREGULAR_PLURALS = {
    "wife": "wives",
    "ex-wife": "ex-wives",
    "child": "children",
    "puppy": "puppies",
    "grandchild": "grandchildren",
    "stepchild": "stepchildren",
    "step-child": "step-children",
    "godchild": "godchildren",
    "nanny": "nannies",
    "bunny": "bunnies",
    "mommy": "mommies",
    "mummy": "mummies",
    "daddy": "daddies",
    "granny": "grannies",
    "bestie": "besties",
    "auntie": "aunties",
    "aunty": "aunties",
    "boss": "bosses",
    "sis": "sisses",
    "attorney": "attorneys",
    "landlady": "landladies",
}


def plural(noun: str) -> str:
    """English plural of a role noun ("mother-in-law" -> "mothers-in-law")."""
    if noun in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[noun]
    if noun.endswith("-in-law"):
        return plural(noun[: -len("-in-law")]) + "-in-law"
    return noun + "s"


def _role_lookup() -> dict[str, str]:
    lookup: dict[str, str] = {}
    for role, synonyms in _ROLE_TABLE:
        for word in (role.noun, *synonyms):
            lookup.setdefault(word, role.noun)
            lookup.setdefault(plural(word), role.noun)
    return lookup


#: Any spelling of a role noun, singular or plural -> its canonical noun.
ROLE_WORDS: dict[str, str] = _role_lookup()
#: Most words any role spelling has ("personal trainer": 2).
LONGEST_ROLE = max(len(w.split()) for w in ROLE_WORDS)

#: Roles a broader role includes: "my spouse" also finds a wife or a husband.
_FAMILIES: dict[str, tuple[str, ...]] = {
    "spouse": ("wife", "husband"),
    "wife": ("spouse",),
    "husband": ("spouse",),
    "partner": ("wife", "husband", "spouse", "boyfriend", "girlfriend", "fiance"),
    "child": ("son", "daughter", "stepson", "stepdaughter", "stepchild"),
    "parent": ("mother", "father", "stepmother", "stepfather"),
    "sibling": (
        "brother",
        "sister",
        "half-brother",
        "half-sister",
        "stepbrother",
        "stepsister",
        "twin",
    ),
    "grandparent": ("grandmother", "grandfather"),
    "grandchild": ("grandson", "granddaughter"),
    "friend": ("best friend",),
    "pet": ("dog", "cat", "horse", "rabbit"),
    "godchild": ("godson", "goddaughter"),
}
#: Symmetric predicates: either end holds the role toward the other.
_SYMMETRIC: dict[str, tuple[str, ...]] = {"married to": ("spouse", "wife", "husband", "partner")}
#: Words before a role noun that keep its meaning ("my older brother").
_ROLE_MODIFIERS = frozenset(
    [
        "new",
        "current",
        "younger",
        "older",
        "little",
        "big",
        "baby",
        "eldest",
        "oldest",
        "youngest",
        "middle",
        "only",
        "dear",
        "beloved",
        "lovely",
        "wonderful",
        "amazing",
        "good",
        "great",
        "dearest",
        "first",
        "second",
        "third",
        "twin",
    ]
)
#: Words before a role noun that make it no longer true ("my former manager").
NOT_CURRENT = frozenset(["former", "ex", "previous", "late", "deceased", "future", "old", "prior"])


def role_predicates(noun: str) -> frozenset[str]:
    """Predicates whose edges name a holder of role ``noun`` (itself and narrower roles)."""
    preds = {ROLES[n].predicate for n in (noun, *_FAMILIES.get(noun, ())) if n in ROLES}
    preds.update(p for p, nouns in _SYMMETRIC.items() if noun in nouns)
    return frozenset(preds)


def _aliases_by_predicate() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for noun in ROLES:
        for predicate in role_predicates(noun):
            out.setdefault(predicate, []).append(noun)
    return {p: tuple(sorted(nouns)) for p, nouns in out.items()}


#: Predicate -> every role noun its holder can be called by ("husband of" -> husband, spouse, partner).
ALIAS_NOUNS: dict[str, tuple[str, ...]] = _aliases_by_predicate()


def holders(owner_keys: Iterable[str], noun: str, edges: Iterable[Edge]) -> list[tuple[str, Edge]]:
    """``(holder, edge)`` for each edge naming a holder of role ``noun`` toward an owner."""
    owners = set(owner_keys)
    predicates = role_predicates(noun)
    role = ROLES.get(noun)
    found: list[tuple[str, Edge]] = []
    for edge in edges:
        if edge.predicate not in predicates:
            continue
        s, o = key(edge.subject), key(edge.object)
        if edge.predicate in _SYMMETRIC:
            if o in owners:
                found.append((edge.subject, edge))
            if s in owners:
                found.append((edge.object, edge))
        elif role is not None and not role.holder_is_subject:
            if s in owners:
                found.append((edge.object, edge))
        elif o in owners:
            found.append((edge.subject, edge))
    return found


def aliases_of(edge: Edge) -> list[tuple[str, str]]:
    """``(holder key, alias key)`` pairs this role edge establishes."""
    nouns = ALIAS_NOUNS.get(edge.predicate, ())
    if not nouns:
        return []
    s, o = key(edge.subject), key(edge.object)
    out: list[tuple[str, str]] = []
    for noun in nouns:
        role = ROLES[noun]
        if edge.predicate in _SYMMETRIC:
            out += [(s, alias(o, noun)), (o, alias(s, noun))]
        elif role.predicate == edge.predicate and not role.holder_is_subject:
            out.append((o, alias(s, noun)))
        else:
            out.append((s, alias(o, noun)))
    return out


def read_role(words: Sequence[str]) -> tuple[str | None, int]:
    """The canonical role at the start of ``words`` (longest match) and the words it used."""
    start = 0
    while start < len(words) and words[start] in _ROLE_MODIFIERS:
        start += 1
    for length in range(min(LONGEST_ROLE, len(words) - start), 0, -1):
        phrase = " ".join(words[start : start + length])
        if phrase in ROLE_WORDS:
            return ROLE_WORDS[phrase], start + length
    return None, 0
