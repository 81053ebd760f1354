"""The relation graph's rules (SUPPLEMENT §6). Pure: standard library only.

Three parts:

- **Roles.** A role phrase ("my manager", "Dana's husband") names whoever
  holds that role toward an owner. A role edge records it with the role's
  predicate: "Dana is my manager." -> ``(Dana, manages, the user)``, "Dana's
  husband is Lee." -> ``(Lee, husband of, Dana)``. A role whose holder is not
  named ("My mom lives in Lisbon.") becomes the alias entity ``the user's
  mother``; aliases and named holders are the same node during traversal.
- **The rules extractor** (:func:`extract`): deterministic patterns for the
  common shapes of personal facts. First-person words resolve to
  ``the user``. Negated, hedged, conditional, future and question sentences
  yield nothing: a graph edge is asserted as true.
- **Traversal** (:class:`Traversal`): breadth-first over edges treated as
  undirected, as a state machine that says which entities it wants edges for
  and is fed the edges, so the I/O stays in the caller (psycopg's
  generators/waiting split). ``the user`` is reached but not expanded unless
  it is where the search starts: nearly every first-person fact touches it,
  and expanding it would turn any two-hop question into a dump of the profile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

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


# --- roles ---------------------------------------------------------------------


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
_LONGEST_ROLE = max(len(w.split()) for w in ROLE_WORDS)

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
_NOT_CURRENT = frozenset(["former", "ex", "previous", "late", "deceased", "future", "old", "prior"])


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


def key(entity: str) -> str:
    """The matching form of an entity: case-insensitive, whitespace collapsed."""
    return " ".join(entity.split()).lower()


def alias(owner: str, noun: str) -> str:
    """The entity "<owner>'s <role>" used when a role's holder is not named."""
    return f"{owner}'s {noun}"


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


# --- entity phrases --------------------------------------------------------------

_FIRST_PERSON = frozenset(
    {"i", "me", "myself", "mine", "my self", "the user", "user", "we", "us", "ourselves"}
)


@dataclass(frozen=True)
class EntityPath:
    """A queried entity: a base entity and a chain of roles ("my manager's husband")."""

    base: str
    roles: tuple[str, ...] = ()


def _read_role(words: Sequence[str]) -> tuple[str | None, int]:
    """The canonical role at the start of ``words`` (longest match) and the words it used."""
    start = 0
    while start < len(words) and words[start] in _ROLE_MODIFIERS:
        start += 1
    for length in range(min(_LONGEST_ROLE, len(words) - start), 0, -1):
        phrase = " ".join(words[start : start + length])
        if phrase in ROLE_WORDS:
            return ROLE_WORDS[phrase], start + length
    return None, 0


def parse_entity(text: str) -> EntityPath:
    """Resolve a queried entity phrase: first person, role chains, or a plain name."""
    phrase = key(_normalise(text)).strip(" .?!,;:\"'")
    if phrase in _FIRST_PERSON:
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
        noun, used = _read_role(words)
        if noun is None or used != len(words):
            roles.append(part)  # not a known role: matched only as an alias entity
        else:
            roles.append(noun)
    return EntityPath(key(base), tuple(roles))


# --- the rules extractor ------------------------------------------------------------

_ABBREVIATIONS = (
    "Dr",
    "Mr",
    "Mrs",
    "Ms",
    "Mx",
    "St",
    "Jr",
    "Sr",
    "Inc",
    "Ltd",
    "Co",
    "Corp",
    "Prof",
    "Mt",
    "Ave",
    "Rd",
    "No",
    "vs",
    "etc",
    "approx",
)
_DOT = "\u2024"  # stands in for an abbreviation's period while sentences are split
_ABBREV_RE = re.compile(r"\b(" + "|".join(_ABBREVIATIONS) + r")\.(?=\s|$)")
_INITIALISM_RE = re.compile(r"\b((?:[A-Za-z]\.){2,})")

_CONTRACTIONS = [
    (re.compile(r"\b(I)'m\b", re.I), r"\1 am"),
    (re.compile(r"\b(I|you|we|they)'ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(I|you|we|they|he|she)'ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(I|you|we|they|he|she)'d\b", re.I), r"\1 would"),
    (re.compile(r"\b(you|we|they)'re\b", re.I), r"\1 are"),
    (re.compile(r"\b(he|she|it|that|there|who|what|where)'s\b", re.I), r"\1 is"),
    (re.compile(r"\bcan't\b", re.I), "can not"),
    (re.compile(r"\bwon't\b", re.I), "will not"),
    (re.compile(r"n't\b", re.I), " not"),
    # "Dana's my manager": a possessive is never followed by "my".
    (re.compile(r"\b([A-Z][\w-]*)'s (?=(?:my|our|his|her|their|a|an|the)\b)"), r"\1 is "),
]

_NAME_WORD = r"(?:[A-Z][\w\u00C0-\u024F-]*(?:'(?!s\b)[A-Za-z]+)?|[A-Z]\u2024)"
_NAME_RE = (
    rf"{_NAME_WORD}(?:\s+(?:(?:van|von|de|da|del|der|di|du|la|le|bin|al|of|the)\s+)?{_NAME_WORD})*"
)
#: Capitalised words that do not start a name.
_NOT_NAMES = frozenset(
    [
        "I",
        "A",
        "An",
        "The",
        "This",
        "That",
        "These",
        "Those",
        "It",
        "Its",
        "He",
        "She",
        "They",
        "We",
        "You",
        "Me",
        "Him",
        "Her",
        "Us",
        "Them",
        "My",
        "Our",
        "Your",
        "His",
        "Their",
        "There",
        "Here",
        "What",
        "Where",
        "When",
        "Why",
        "How",
        "Who",
        "Whom",
        "Whose",
        "Which",
        "If",
        "Unless",
        "Whether",
        "Maybe",
        "Perhaps",
        "Please",
        "Remember",
        "Note",
        "Also",
        "And",
        "But",
        "So",
        "Or",
        "Yes",
        "No",
        "Not",
        "Today",
        "Tomorrow",
        "Yesterday",
        "Tonight",
        "Everyone",
        "Someone",
        "Nobody",
        "Everybody",
        "Somebody",
        "Anyone",
        "Nothing",
        "Something",
        "Everything",
        "Each",
        "Every",
        "Some",
        "Any",
        "All",
        "Both",
        "Neither",
        "Either",
        "One",
        "Ask",
        "Tell",
        "Call",
        "Remind",
        "Let",
        "Do",
        "Does",
        "Did",
        "Is",
        "Are",
        "Was",
        "Were",
        "Be",
        "Been",
        "Can",
        "Could",
        "Should",
        "Would",
        "Will",
        "Shall",
        "May",
        "Might",
        "Must",
        "Have",
        "Has",
        "Had",
        "Just",
        "Only",
        "Still",
        "Even",
        "Then",
        "Now",
        "Once",
        "Since",
        "After",
        "Before",
        "During",
        "While",
        "Because",
        "Although",
        "Though",
        "Dear",
        "Hi",
        "Hello",
        "Thanks",
        "Okay",
        "OK",
    ]
)
_LEAD_INS = re.compile(
    r"^(?:(?:please\s+)?remember\s+that|note\s+that|fyi|just\s+so\s+you\s+know|for\s+the\s+record|"
    r"also|by\s+the\s+way|btw|fun\s+fact|and|so|well|oh|anyway|actually)\b[,:]?\s*",
    re.I,
)
_SKIP_START = re.compile(
    r"^(?:if|unless|whether|maybe|perhaps|should|would|could|can|do|does|did|is|are|was|were|"
    r"where|who|what|when|why|how|which|ask|tell|call|remind|let|don't|never|please|imagine|suppose)\b",
    re.I,
)
_NEGATED = re.compile(
    r"\b(?:not|never|no longer|nobody|no one|none|neither|nor|hardly|anymore)\b", re.I
)
_HEDGED = re.compile(
    r"\b(?:might|may|could|would|should|will|shall|must|maybe|perhaps|probably|possibly|if|unless|"
    r"wish|hope|hopes|hoping|want to|wants to|going to|plan to|plans to|planning to|used to|"
    r"think|thinks|guess|believe|seems|apparently|rumou?red|supposedly|allegedly)\b"
)
_CLAUSE_SPLIT = re.compile(
    r"\s*;\s*|,?\s+(?:and|but|while|whereas)\s+(?=(?:I|we|he|she|my|our|his|her)\b|"
    rf"{_NAME_RE}(?:'s\s+[a-z-]+)?\s+(?:is|was|lives|works|has|manages|loves|likes|plays|speaks|studies|"
    r"teaches|owns|drives|reports|prefers|hates|enjoys)\b)"
)
_ADVERBS = re.compile(
    r"^(?:(?:currently|now|still|also|actually|really|both|all|just|recently|officially|happily|"
    r"mostly|usually|finally|already|absolutely|truly|totally|proudly)\s+)+",
    re.I,
)
_OBJECT_STOP = re.compile(
    r"\s+(?:as|since|because|with|when|while|where|who|whom|whose|which|that|and|but|or|until|till|"
    r"from|for|during|in|on|at|near|by|every|each|after|before|so|although|though|if|to|about|than|"
    r"like|including|except|whenever|unless|back|too|nowadays|these|this|again)\b|\s*[,;:!?()\[\]\"]|\s+-\s+"
)
_PRONOUN_OBJECTS = frozenset(
    [
        "it",
        "them",
        "him",
        "her",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "something",
        "anything",
        "everything",
        "nothing",
        "one",
        "some",
        "any",
        "all",
        "lots",
        "a",
        "lot",
        "stuff",
        "things",
    ]
)
_ATTRIBUTES = {
    "name": "named",
    "full name": "named",
    "nickname": "nicknamed",
    "middle name": "middle name",
    "birthday": "birthday",
    "hometown": "hometown",
    "nationality": "nationality",
    "native language": "native language",
    "first language": "native language",
    "mother tongue": "native language",
    "blood type": "blood type",
    "star sign": "star sign",
    "zodiac sign": "star sign",
    "pronouns": "pronouns",
}
_FAVOURITE = re.compile(r"^(?:favou?rite|preferred)\s+([a-z][a-z -]{1,40})$")


def _normalise(text: str) -> str:
    text = (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u201c", '"')
        .replace("\u201d", '"')
    )
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    return " ".join(text.split())


def _protect(text: str) -> str:
    text = _ABBREV_RE.sub(lambda m: m.group(1) + _DOT, text)
    return _INITIALISM_RE.sub(lambda m: m.group(1).replace(".", _DOT), text)


def _restore(text: str) -> str:
    return text.replace(_DOT, ".")


def sentences(text: str) -> list[str]:
    """Split text into statements; questions are dropped."""
    out = []
    for part in re.split(r"(?<=[.!?])\s+|\n+", _protect(_normalise_lines(text))):
        part = part.strip()
        if not part or part.endswith("?"):
            continue
        out.append(part.rstrip(".! "))
    return out


def _normalise_lines(text: str) -> str:
    return "\n".join(_normalise(line) for line in text.splitlines())


@dataclass
class _Context:
    """What earlier sentences of the same memory settled (pronoun antecedents)."""

    person: str | None = None


@dataclass
class _Subject:
    entities: list[str]
    rest: str
    #: (owner, role) when the subject is an unnamed role holder ("My manager ...").
    role_of: tuple[str, str] | None = None
    extra: list[Relation] = field(default_factory=list)
    is_person: bool = False


def _clean_entity(text: str) -> str:
    text = _restore(text).strip(" \t,;:\"'")
    return " ".join(text.split())


def _role_edge(holder: str, noun: str, owner: str) -> Relation:
    role = ROLES[noun]
    if role.holder_is_subject:
        return Relation(holder, role.predicate, owner)
    return Relation(owner, role.predicate, holder)


def _names(text: str) -> list[str] | None:
    """``Ana``, ``Ana and Ben``, ``Ana, Ben and Cy``: the names, when that is all there is."""
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+|\s*&\s*", text.strip())
    names = []
    for part in parts:
        part = part.strip()
        if not re.fullmatch(_NAME_RE, part) or part.split()[0] in _NOT_NAMES:
            return None
        names.append(_clean_entity(part))
    return names or None


def _read_role_possessive(words: list[str]) -> tuple[str | None, int]:
    """Like :func:`_read_role`, also accepting a trailing ``'s`` on the last role word."""
    lowered = [w.lower() for w in words]
    noun, used = _read_role(lowered)
    if noun is not None:
        return noun, used
    for i, w in enumerate(lowered[: _LONGEST_ROLE + 3]):
        if w.endswith("'s"):
            trial = lowered[:i] + [w[:-2]]
            noun, used = _read_role(trial)
            if noun is not None and used == len(trial):
                return noun, -(i + 1)  # negative: consumed through a possessive
    return None, 0


def _owner_chain(text: str, ctx: _Context) -> tuple[str, str] | None:
    """Read a possessor and any chain of possessive roles: returns (owner, remaining text)."""
    m = re.match(r"(my|our|the user's)\s+(.*)$", text, re.I)
    if m:
        owner, rest = USER, m.group(2)
    else:
        m = re.match(r"(his|her)\s+(.*)$", text, re.I)
        if m:
            if ctx.person is None:
                return None
            owner, rest = ctx.person, m.group(2)
        else:
            m = re.match(rf"({_NAME_RE})'s\s+(.*)$", text)
            if not m or m.group(1).split()[0] in _NOT_NAMES:
                return None
            owner, rest = _clean_entity(m.group(1)), m.group(2)
    while True:
        words = rest.split()
        noun, used = _read_role_possessive(words)
        if noun is None or used >= 0:
            return owner, rest
        owner = alias(owner, noun)
        rest = " ".join(words[-used:])


def _role_phrase(text: str) -> tuple[str | None, str, bool]:
    """A role noun at the start of text -> (noun, remaining text, is_current)."""
    words = text.split()
    lowered = [w.lower().rstrip(",") for w in words]
    if (
        lowered
        and lowered[0] in _NOT_CURRENT
        or (lowered and lowered[0].startswith("ex-") and lowered[0] not in ROLE_WORDS)
    ):
        return None, text, False
    noun, used = _read_role(lowered)
    if noun is None:
        return None, text, True
    # Keep a comma that followed the role word (an appositive: "My manager, Dana, ...").
    last = words[used - 1]
    rest = " ".join(words[used:])
    if last.endswith(","):
        rest = ", " + rest
    return noun, rest, True


def _subject(clause: str, ctx: _Context) -> _Subject | None:
    m = re.match(r"(I|[Ww]e)\b\s*(.*)$", clause)
    if m:
        return _Subject([USER], m.group(2))
    m = re.match(r"the user\b\s*(?!'s)(.*)$", clause, re.I)
    if m:
        return _Subject([USER], m.group(1))
    m = re.match(r"(he|she)\b\s*(.*)$", clause, re.I)
    if m:
        if ctx.person is None:
            return None
        return _Subject([ctx.person], m.group(2), is_person=True)
    chain = _owner_chain(clause, ctx)
    if chain is not None:
        owner, rest = chain
        noun, rest, current = _role_phrase(rest)
        if noun is None:
            return None
        if not current:
            return _Subject([], rest)  # "my former manager": nothing current to record
        m = re.match(rf",?\s*({_NAME_RE})(?:\s*,)?\s*(.*)$", rest)
        if m and m.group(1).split()[0] not in _NOT_NAMES:
            name = _clean_entity(m.group(1))
            return _Subject(
                [name], m.group(2), extra=[_role_edge(name, noun, owner)], is_person=True
            )
        return _Subject(
            [alias(owner, noun)],
            rest.lstrip(", "),
            role_of=(owner, noun),
            is_person=noun != "employer",
        )
    m = re.match(rf"({_NAME_RE}(?:(?:\s*,\s*|\s+and\s+|\s*&\s*){_NAME_RE})*)\s+(.*)$", clause)
    if m and m.group(1).split()[0] not in _NOT_NAMES:
        names = _names(m.group(1))
        if names:
            return _Subject(names, m.group(2), is_person=True)
    return None


def _object(text: str, ctx: _Context, *, article: bool = True) -> tuple[str | None, str]:
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
    chain = _owner_chain(phrase, ctx) if re.match(r"(?:my|our|his|her)\s", low) else None
    if chain is None and re.match(r"(?:his|her|their|your)\s", low):
        return None, rest  # a possessive pronoun with no antecedent
    if chain is not None:
        owner, after = chain
        noun, after2, current = _role_phrase(after)
        if noun is not None and current and not after2.strip(" ,"):
            return alias(owner, noun), rest
        if not after.strip():
            return None, rest
        return alias(owner, after.strip().lower()), rest
    if len(phrase.split()) > 6 or len(phrase) > MAX_ENTITY_CHARS:
        return None, rest
    return _clean_entity(phrase), rest


def _object_list(text: str, ctx: _Context) -> tuple[list[str], str]:
    """``sushi, ramen and tacos``: several objects joined by commas and ``and``."""
    found: list[str] = []
    rest = text
    while True:
        obj, rest = _object(rest, ctx)
        if obj is None:
            break
        found.append(obj)
        m = re.match(r"\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s+&\s+)(?!(?:I|we|he|she|my|our)\b)", rest)
        if not m:
            break
        rest = rest[m.end() :]
    return found, rest


# (pattern over what follows the subject, predicate, kind)
# kinds: "one" an object; "list" several objects; "noun" an object without its article.
_VERB_PATTERNS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(p, re.I), predicate, kind)
    for p, predicate, kind in [
        (r"(?:am|is|are)\s+(?:now\s+)?(?:living|staying)\s+in\s+", "lives in", "one"),
        (r"(?:live|lives|reside|resides)\s+in\s+", "lives in", "one"),
        (r"(?:have|has)\s+(?:recently\s+)?(?:moved|relocated)\s+to\s+", "moved to", "one"),
        (r"(?:moved|relocated)\s+to\s+", "moved to", "one"),
        (r"(?:am|is|are)\s+(?:employed|working)\s+(?:at|for|by)\s+", "works at", "one"),
        (r"(?:work|works)\s+(?:at|for)\s+", "works at", "one"),
        (r"(?:am|is|are)\s+working\s+as\s+", "works as", "noun"),
        (r"(?:work|works)\s+as\s+", "works as", "noun"),
        (r"(?:am|is|are)\s+(?:studying|enrolled)\s+(?:at|in)\s+", "studies at", "one"),
        (r"(?:study|studies)\s+(?:at|in)\s+(?=[A-Z]|the\s)", "studies at", "one"),
        (r"(?:study|studies)\s+", "studies", "one"),
        (r"(?:attend|attends)\s+", "attends", "one"),
        (r"(?:go|goes)\s+to\s+(?:school|college|university)\s+(?:at|in)\s+", "studies at", "one"),
        (r"(?:teach|teaches)\s+at\s+", "teaches at", "one"),
        (r"(?:was|were)\s+born\s+in\s+", "born in", "one"),
        (r"(?:was|were)\s+born\s+on\s+", "born on", "one"),
        (r"grew\s+up\s+in\s+", "grew up in", "one"),
        (r"(?:am|is|are)\s+(?:originally\s+)?from\s+", "from", "one"),
        (r"(?:come|comes)\s+from\s+", "from", "one"),
        (r"(?:am|is|are)\s+married\s+to\s+", "married to", "one"),
        (r"(?:am|is|are)\s+engaged\s+to\s+", "engaged to", "one"),
        (r"(?:am|is|are)\s+dating\s+", "dating", "one"),
        (r"(?:am|is|are)\s+friends\s+with\s+", "friend of", "one"),
        (r"(?:manage|manages)\s+", "manages", "one"),
        (r"(?:report|reports)\s+to\s+", "reports to", "one"),
        (r"(?:am|is|are)\s+allergic\s+to\s+", "allergic to", "list"),
        (r"(?:love|loves|adore|adores)\s+", "loves", "list"),
        (r"(?:like|likes)\s+", "likes", "list"),
        (r"(?:enjoy|enjoys)\s+", "enjoys", "list"),
        (r"(?:prefer|prefers)\s+", "prefers", "list"),
        (r"(?:hate|hates|can not stand|cannot stand)\s+", "hates", "list"),
        (r"(?:dislike|dislikes)\s+", "dislikes", "list"),
        (r"(?:speak|speaks)\s+", "speaks", "list"),
        (r"(?:play|plays)\s+", "plays", "list"),
        (r"(?:own|owns)\s+", "owns", "one"),
        (r"(?:drive|drives)\s+", "drives", "one"),
        (r"(?:support|supports|root for|roots for)\s+", "supports", "one"),
    ]
]
_AGE = re.compile(r"(?:am|is|are)\s+(\d{1,3})\s+(?:years?\s+old|yo)\b", re.I)
_HAS_ROLE = re.compile(
    r"(?:have|has)\s+(?:got\s+)?(a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+)\s+(.*)$",
    re.I,
)
_COPULA = re.compile(r"(?:am|is|are)\s+(?:also\s+|now\s+|actually\s+)?(.*)$", re.I)
_IS_A = re.compile(r"(?:am|is|are)\s+(?:also\s+)?(an?)\s+(.*)$", re.I)


def _continuation(rest: str, last: str, subject: list[str], ctx: _Context) -> list[Relation]:
    """What follows an object: "... at Acme as a data engineer", "... and works at X"."""
    out: list[Relation] = []
    rest = rest.strip()
    if last in ("works at",):
        m = re.match(r"as\s+(.*)$", rest, re.I)
        if m:
            obj, rest = _object(m.group(1), ctx, article=False)
            if obj:
                out += [Relation(s, "works as", obj) for s in subject]
                last = "works as"
    if last in ("works as", "is a"):
        m = re.match(r"(?:at|for)\s+(.*)$", rest.strip(), re.I)
        if m:
            obj, rest = _object(m.group(1), ctx)
            if obj:
                out += [Relation(s, "works at", obj) for s in subject]
                last = "works at"
    m = re.match(r",?\s*(?:and|but)\s+(.*)$", rest.strip(), re.I)
    if m and not re.match(r"(?:I|we|he|she|my|our)\b", m.group(1)):
        out += _predicates(_ADVERBS.sub("", m.group(1)), subject, ctx)
    return out


def _predicates(rest: str, subject: list[str], ctx: _Context) -> list[Relation]:
    rest = _ADVERBS.sub("", rest.strip())
    m = _AGE.match(rest)
    if m:
        return [Relation(s, "age", m.group(1)) for s in subject]
    for pattern, predicate, kind in _VERB_PATTERNS:
        m = pattern.match(rest)
        if not m:
            continue
        tail = rest[m.end() :]
        if kind == "list":
            objects, after = _object_list(tail, ctx)
        else:
            obj, after = _object(tail, ctx, article=kind != "noun")
            objects = [obj] if obj else []
        if not objects:
            return []
        found = [Relation(s, predicate, o) for s in subject for o in objects if key(s) != key(o)]
        return found + _continuation(after, predicate, subject, ctx)
    m = _HAS_ROLE.match(rest)
    if m:
        return _has_role(m.group(2), subject, ctx)
    m = _COPULA.match(rest)
    if m:
        found = _is_role(m.group(1), subject, ctx)
        if found is not None:
            return found
    m = _IS_A.match(rest)
    if m:
        text = m.group(2)
        # "is a friend of mine" / "is a friend of Dana's": a role after all.
        fm = re.match(r"([a-z -]+?)\s+of\s+(mine|ours|([A-Z][\w-]*)'s)$", text.strip())
        if fm and fm.group(1).lower() in ROLE_WORDS:
            noun = ROLE_WORDS[fm.group(1).lower()]
            owner = USER if fm.group(3) is None else fm.group(3)
            return [_role_edge(s, noun, owner) for s in subject]
        obj, after = _object(text, ctx, article=False)
        if obj is None or obj[:1].isupper() and obj.split()[0] in _NOT_NAMES:
            return []
        return [Relation(s, "is a", obj) for s in subject] + _continuation(
            after, "is a", subject, ctx
        )
    return []


def _has_role(text: str, subject: list[str], ctx: _Context) -> list[Relation]:
    """``has a dog named Rex`` / ``have two kids, Ava and Ben`` / ``has a sister, Ana``."""
    noun, rest, current = _role_phrase(text)
    if noun is None or not current:
        return []
    m = re.match(r",?\s*(?:(?:named|called)\s+|:\s*)?(.*)$", rest.strip())
    names = _names(_restore(m.group(1)) if m else "") if m else None
    if not names:
        return []
    return [_role_edge(n, noun, s) for s in subject for n in names]


def _is_role(text: str, subject: list[str], ctx: _Context) -> list[Relation] | None:
    """``is my manager`` / ``are Dana's kids`` / ``is my manager's husband``; None if not a role."""
    chain = _owner_chain(text, ctx)
    if chain is None:
        return None
    owner, rest = chain
    noun, after, current = _role_phrase(rest)
    if noun is None:
        return None
    if not current:
        return []
    return [_role_edge(s, noun, owner) for s in subject if key(s) != key(owner)]


def _attribute(clause: str, ctx: _Context) -> list[Relation] | None:
    """``My birthday is March 3`` / ``My favourite colour is green`` / ``My name is Sam``."""
    chain = _owner_chain(clause, ctx)
    if chain is None:
        return None
    owner, rest = chain
    m = re.match(r"([a-z][a-z -]*?)\s+(?:is|are)\s+(.+)$", rest, re.I)
    if not m:
        return None
    attr = m.group(1).lower().strip()
    if attr in _ATTRIBUTES:
        predicate = _ATTRIBUTES[attr]
    else:
        fav = _FAVOURITE.match(attr)
        if not fav:
            return None
        predicate = "favorite " + fav.group(1).replace("colour", "color").replace(
            "flavour", "flavor"
        )
    if predicate in ("named", "nicknamed"):
        names = _names(m.group(2))
        if not names:
            return []
        held = ROLE_WORDS.get(owner.rsplit("'s ", 1)[1]) if "'s " in owner else None
        if predicate == "named" and held is not None:
            # "My manager's name is Dana.": Dana holds the role.
            ctx.person = names[0]
            return [_role_edge(n, held, _owner_of(owner)) for n in names]
        return [Relation(owner, predicate, n) for n in names]
    if predicate.startswith("favorite"):
        values, _ = _object_list(m.group(2), ctx)
        return [Relation(owner, predicate, v) for v in values]
    value = _clean_entity(re.split(r"[,;]", m.group(2))[0])
    if not value or len(value) > MAX_ENTITY_CHARS:
        return []
    return [Relation(owner, predicate, value)]


def _clause(clause: str, ctx: _Context) -> list[Relation]:
    clause = _LEAD_INS.sub("", clause.strip())
    if not clause or _SKIP_START.match(clause) or _NEGATED.search(clause) or _HEDGED.search(clause):
        return []
    attribute = _attribute(clause, ctx)
    if attribute is not None:
        return attribute
    subject = _subject(clause, ctx)
    if subject is None or not subject.entities:
        return []
    found = list(subject.extra)
    rest = subject.rest.strip()
    person = subject.entities[0] if subject.is_person and len(subject.entities) == 1 else None
    if subject.role_of is not None:
        owner, noun = subject.role_of
        # "My manager is Dana." / "My kids are Ava and Ben." / "My manager's name is Dana."
        m = re.match(r"(?:'s\s+name\s+is|(?:is|are)(?:\s+(?:called|named))?)\s+(.*)$", rest, re.I)
        names = _names(_restore(m.group(1))) if m else None
        if names:
            ctx.person = names[0] if len(names) == 1 else ctx.person
            return found + [_role_edge(n, noun, owner) for n in names]
    found += _predicates(rest, subject.entities, ctx)
    if person is not None and person != USER:
        ctx.person = person  # after the predicates: "Lee is her husband" means Dana's
    return found


def _valid(relation: Relation) -> bool:
    parts = (relation.subject, relation.predicate, relation.object)
    if any("\x00" in p or not p.isprintable() for p in parts):
        return False  # control characters (and NUL, which PostgreSQL text cannot hold)
    return (
        0 < len(relation.subject) <= MAX_ENTITY_CHARS
        and 0 < len(relation.object) <= MAX_ENTITY_CHARS
        and 0 < len(relation.predicate) <= MAX_PREDICATE_CHARS
        and key(relation.subject) != key(relation.object)
    )


def extract(text: str) -> list[Relation]:
    """The rules extractor: every relation the patterns find in ``text``, in order, once each."""
    ctx = _Context()
    found: list[Relation] = []
    for sentence in sentences(text):
        for clause in _CLAUSE_SPLIT.split(sentence):
            for relation in _clause(clause, ctx):
                relation = Relation(
                    _clean_entity(relation.subject),
                    relation.predicate,
                    _clean_entity(relation.object),
                )
                if _valid(relation) and relation not in found:
                    found.append(relation)
    return found


# --- normalising relations from elsewhere (the llm extractor) ----------------------

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
    value = " ".join(_normalise(text).split()).strip(" .,;:\"'")
    low = value.lower()
    if low in _FIRST_PERSON:
        return USER
    m = re.match(r"(?:my|our|the user's)\s+(.+)$", value, re.I)
    if m:
        noun, used = _read_role(m.group(1).lower().split())
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
    return out if _valid(out) else None


# --- traversal ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What the traversal wants next: edges touching ``expand``, role edges of ``owners``."""

    expand: tuple[str, ...]
    owners: tuple[str, ...]
    predicates: tuple[str, ...]


class Traversal:
    """Breadth-first search over undirected edges, fed by the caller.

    ``while (req := t.wanted()) is not None: t.feed(fetch(req))``, then read
    :attr:`edges` (each with the hop it was found at). ``fetch`` returns, for
    a request, the edges touching any ``expand`` entity plus the edges whose
    predicate is in ``predicates`` and that touch an ``owners`` entity.

    An alias ("the user's manager") and the holder a role edge names (Dana)
    are one node: reaching either reaches the other at no extra hop.
    """

    def __init__(self, entity: str, *, max_hops: int, max_edges: int) -> None:
        self.path = parse_entity(entity)
        self.max_hops = max_hops
        self.max_edges = max_edges
        #: Each edge found, with the hop (1..max_hops) it was found at.
        self.edges: list[tuple[Edge, int]] = []
        #: True when the edge cap cut the search short.
        self.truncated = False
        self._seen: set[int] = set()
        self._start: set[str] = {self.path.base}
        self._visited: set[str] = {self.path.base}
        self._step = 0  # roles of the path resolved so far
        self._level = 0  # nodes being expanded are this many hops from the start
        self._pending: set[str] = set()  # nodes of this level still to fetch
        self._next: set[str] = set()  # nodes of the next level
        self._awaiting: dict[str, str] = {}  # alias key -> role noun, holders not yet looked up
        self._asked: set[str] = set()
        self._asked_aliases: dict[str, str] = {}
        self._done = max_hops < 1 or max_edges < 1
        if not self.path.roles:
            self._begin_search()

    def wanted(self) -> Request | None:
        """The next request, or None when the search is over."""
        while not self._done:
            if self._step < len(self.path.roles):
                noun = self.path.roles[self._step]
                return Request((), tuple(sorted(self._start)), tuple(sorted(role_predicates(noun))))
            self._asked = {k for k in self._pending if k != USER or k in self._start}
            self._asked_aliases = dict(self._awaiting)
            self._pending, self._awaiting = set(), {}
            owners = sorted({_owner_of(a) for a in self._asked_aliases})
            predicates: set[str] = set()
            for noun in self._asked_aliases.values():
                predicates |= role_predicates(noun)
            if self._asked or owners:
                return Request(tuple(sorted(self._asked)), tuple(owners), tuple(sorted(predicates)))
            self._advance()
        return None

    def feed(self, edges: Iterable[Edge]) -> None:
        """The edges answering the last request."""
        batch = sorted({e.id: e for e in edges}.values(), key=lambda e: e.id)
        if self._step < len(self.path.roles):
            self._resolve_step(batch)
            return
        for alias_key, noun in self._asked_aliases.items():
            for holder, edge in holders([_owner_of(alias_key)], noun, batch):
                self._collect(edge)
                self._discover(key(holder), same_level=True)
        for edge in batch:
            s, o = key(edge.subject), key(edge.object)
            if s not in self._asked and o not in self._asked:
                continue
            self._collect(edge)
            for end in (s, o):
                self._discover(end, same_level=False)
            for holder, alias_key in aliases_of(edge):
                if holder in self._asked:
                    self._discover(alias_key, same_level=True)
        if not self._pending and not self._awaiting:
            self._advance()

    def _begin_search(self) -> None:
        self._pending = set(self._start)
        for entity in self._start:
            self._await_holders(entity)

    def _await_holders(self, entity: str) -> None:
        if "'s " in entity:
            noun = ROLE_WORDS.get(entity.rsplit("'s ", 1)[1])
            if noun is not None:
                self._awaiting[entity] = noun

    def _resolve_step(self, batch: list[Edge]) -> None:
        noun = self.path.roles[self._step]
        found = {key(holder) for holder, _ in holders(self._start, noun, batch)}
        # The unnamed holder ("the user's manager") is a node too.
        found.update(alias(owner, noun) for owner in self._start)
        self._start = found
        self._visited |= found
        self._step += 1
        if self._step == len(self.path.roles):
            self._begin_search()

    def _collect(self, edge: Edge) -> None:
        if edge.id in self._seen or self._done:
            return
        if len(self.edges) >= self.max_edges:
            self.truncated = True
            self._done = True
            return
        self._seen.add(edge.id)
        self.edges.append((edge, self._level + 1))

    def _discover(self, entity: str, *, same_level: bool) -> None:
        if entity in self._visited:
            return
        self._visited.add(entity)
        if same_level:
            self._pending.add(entity)
            self._await_holders(entity)
        else:
            self._next.add(entity)

    def _advance(self) -> None:
        self._level += 1
        if self._level >= self.max_hops or not self._next:
            self._done = True
            return
        self._pending, self._next = self._next, set()
        for entity in self._pending:
            self._await_holders(entity)


def _owner_of(alias_key: str) -> str:
    return alias_key.rsplit("'s ", 1)[0]


def traverse(
    entity: str, edges: Sequence[Edge], *, max_hops: int, max_edges: int
) -> list[tuple[Edge, int]]:
    """Run a :class:`Traversal` over an in-memory edge list (tests, small graphs)."""
    t = Traversal(entity, max_hops=max_hops, max_edges=max_edges)
    while (request := t.wanted()) is not None:
        expand, owners, preds = set(request.expand), set(request.owners), set(request.predicates)
        t.feed(
            e
            for e in edges
            if key(e.subject) in expand
            or key(e.object) in expand
            or (e.predicate in preds and (key(e.subject) in owners or key(e.object) in owners))
        )
    return t.edges
