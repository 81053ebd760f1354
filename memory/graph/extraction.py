"""The rules extractor: deterministic patterns for the common shapes of personal facts.

First-person words resolve to ``the user``. Negated, hedged, conditional,
future and question sentences yield nothing: a graph edge is asserted as true.
"""

from __future__ import annotations

import re

from .edges import MAX_ENTITY_CHARS, USER, Relation, key, owner_of, valid
from .phrases import (
    Context,
    clean_entity,
    owner_chain,
    read_names,
    read_object,
    read_objects,
    read_subject,
    role_edge,
    role_phrase,
)
from .roles import ROLE_WORDS
from .sentences import (
    CLAUSE_SPLIT,
    HEDGED,
    LEAD_INS,
    NEGATED,
    NOT_NAMES,
    SKIP_START,
    restore,
    sentences,
)

_ADVERBS = re.compile(
    r"^(?:(?:currently|now|still|also|actually|really|both|all|just|recently|officially|happily|"
    r"mostly|usually|finally|already|absolutely|truly|totally|proudly)\s+)+",
    re.I,
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
    "date of birth": "birthday",
    "birth date": "birthday",
    "home town": "hometown",
    "car": "car",
}
#: What may follow "my car is" / "I drive" as a car: an article, a make or model
#: (capitalised), or a year; not "red", "in the shop", "to work".
_CAR = re.compile(r"^(?:(?:an?|the)\s+\S|[A-Z0-9])")
_NOT_A_CAR = re.compile(
    r"^(?:to|home|around|back|there|here|fast|slowly|carefully|safely|everywhere|into|through|"
    r"past|by|in|on|for|with|at|from|up|down|over|out|off|away|daily|every|across|along)\b",
    re.I,
)
_FAVOURITE = re.compile(r"^(?:favou?rite|preferred)\s+([a-z][a-z -]{1,40})$")


# (pattern over what follows the subject, predicate, kind)
# kinds: "one" an object; "list" several objects; "noun" an object without its article.
_VERB_PATTERNS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(p, re.I), predicate, kind)
    for p, predicate, kind in [
        (r"(?:am|is|are)\s+(?:now\s+)?(?:living|staying)\s+in\s+", "lives in", "one"),
        (r"(?:am|is|are)\s+(?:now\s+)?based\s+in\s+", "lives in", "one"),
        (r"(?:live|lives|reside|resides)\s+in\s+", "lives in", "one"),
        # The present perfect holds still only when it says so ("has lived in Porto
        # since 2015", "for ten years", "has always lived in"); "I have lived in
        # Porto and Faro before" names past homes.
        (r"(?:have|has)\s+always\s+(?:lived|resided)\s+in\s+", "lives in", "one"),
        (
            r"(?:have|has)\s+(?:now\s+)?(?:lived|resided)\s+in\s+"
            r"(?=[^,;.]*?\b(?:since|for)\b)",
            "lives in",
            "one",
        ),
        (
            r"(?:have|has)\s+(?:(?:recently|just|finally|now|also)\s+)?(?:moved|relocated)\s+to\s+",
            "moved to",
            "one",
        ),
        (r"(?:moved|relocated)\s+to\s+", "moved to", "one"),
        (r"(?:am|is|are)\s+(?:employed|working)\s+(?:at|for|by)\s+", "works at", "one"),
        (
            r"(?:work|works)\s+(?:remotely\s+|full[- ]time\s+|part[- ]time\s+)?(?:at|for)\s+",
            "works at",
            "one",
        ),
        (
            r"(?:got|have|has)\s+(?:got\s+)?(?:a\s+)?(?:new\s+)?job\s+(?:at|with)\s+",
            "works at",
            "one",
        ),
        (r"(?:am|is|are)\s+working\s+as\s+", "works as", "noun"),
        (r"(?:work|works)\s+as\s+", "works as", "noun"),
        (r"(?:am|is|are)\s+(?:studying|enrolled)\s+(?:at|in)\s+", "studies at", "one"),
        (
            r"(?:am|is|are)\s+(?:an?\s+)?(?:(?:first|second|third|final|last)[- ]year\s+)?"
            r"(?:student|undergraduate|undergrad|grad student|graduate student|phd student|"
            r"doctoral student|postgrad|postgraduate)\s+(?:at|in)\s+(?=[A-Z]|the\s)",
            "studies at",
            "one",
        ),
        (r"(?:am|is|are)\s+studying\s+", "studies", "one"),
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
        (
            r"(?:have|has)\s+(?:got\s+)?(?:(?:an?|severe|mild|serious|bad)\s+)*"
            r"allerg(?:y|ies)\s+to\s+",
            "allergic to",
            "list",
        ),
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
#: "has a severe peanut allergy": the allergen before the noun. Not a negation, a
#: count or a kind ("no allergies", "two allergies", "seasonal allergies").
_NOUN_ALLERGY = re.compile(
    r"(?:have|has)\s+(?:got\s+)?(?:an?\s+)?(?:(?:severe|mild|serious|bad|slight)\s+)?"
    r"(?!(?:no|not|any|an?|the|some|several|many|multiple|few|other|got|had|severe|mild|"
    r"serious|bad|slight|seasonal|food|skin|\d+|one|two|three|four|five)\b)"
    r"([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)\s+allerg(?:y|ies)\b",
    re.I,
)
_HAS_ROLE = re.compile(
    r"(?:have|has)\s+(?:got\s+)?(a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+)\s+(.*)$",
    re.I,
)
_COPULA = re.compile(r"(?:am|is|are)\s+(?:also\s+|now\s+|actually\s+)?(.*)$", re.I)
_IS_A = re.compile(r"(?:am|is|are)\s+(?:also\s+)?(an?)\s+(.*)$", re.I)


def _continuation(rest: str, last: str, subject: list[str], ctx: Context) -> list[Relation]:
    """What follows an object: "... at Acme as a data engineer", "... and works at X"."""
    out: list[Relation] = []
    rest = rest.strip()
    if last in ("works at",):
        m = re.match(r"as\s+(.*)$", rest, re.I)
        if m:
            obj, rest = read_object(m.group(1), ctx, article=False)
            if obj:
                out += [Relation(s, "works as", obj) for s in subject]
                last = "works as"
    if last in ("works as", "is a"):
        m = re.match(r"(?:at|for)\s+(.*)$", rest.strip(), re.I)
        if m:
            obj, rest = read_object(m.group(1), ctx)
            if obj:
                out += [Relation(s, "works at", obj) for s in subject]
                last = "works at"
    if last == "studies":
        # "I study law at Yale" ("studies physics in Santiago" names a city, not a school)
        m = re.match(r"at\s+(?=[A-Z]|the\s)(.*)$", rest.strip())
        if m:
            obj, rest = read_object(m.group(1), ctx)
            if obj:
                out += [Relation(s, "studies at", obj) for s in subject]
                last = "studies at"
    m = re.match(r",?\s*(?:and|but)\s+(.*)$", rest.strip(), re.I)
    if m and not re.match(r"(?:I|we|he|she|my|our)\b", m.group(1)):
        out += _predicates(_ADVERBS.sub("", m.group(1)), subject, ctx)
    return out


def _predicates(rest: str, subject: list[str], ctx: Context) -> list[Relation]:
    rest = _ADVERBS.sub("", rest.strip())
    m = _AGE.match(rest)
    if m:
        return [Relation(s, "age", m.group(1)) for s in subject]
    for pattern, predicate, kind in _VERB_PATTERNS:
        m = pattern.match(rest)
        if not m:
            continue
        tail = rest[m.end() :]
        if predicate == "drives" and (_NOT_A_CAR.match(tail) or not _CAR.match(tail)):
            return []  # "I drive to work", "I drive carefully": no car named
        if kind == "list":
            objects, after = read_objects(tail, ctx)
        else:
            obj, after = read_object(tail, ctx, article=kind != "noun")
            objects = [obj] if obj else []
        if not objects:
            return []
        found = [Relation(s, predicate, o) for s in subject for o in objects if key(s) != key(o)]
        return found + _continuation(after, predicate, subject, ctx)
    m = _NOUN_ALLERGY.match(rest)
    if m:
        return [Relation(s, "allergic to", m.group(1)) for s in subject]
    m = _HAS_ROLE.match(rest)
    if m:
        return _has_role(m.group(2), subject, ctx)
    m = _COPULA.match(rest)
    if m:
        role_edges = _is_role(m.group(1), subject, ctx)
        if role_edges is not None:
            return role_edges
    m = _IS_A.match(rest)
    if m:
        text = m.group(2)
        # "is a friend of mine" / "is a friend of Dana's": a role after all.
        fm = re.match(r"([a-z -]+?)\s+of\s+(mine|ours|([A-Z][\w-]*)'s)$", text.strip())
        if fm and fm.group(1).lower() in ROLE_WORDS:
            noun = ROLE_WORDS[fm.group(1).lower()]
            owner = USER if fm.group(3) is None else fm.group(3)
            return [role_edge(s, noun, owner) for s in subject]
        obj, after = read_object(text, ctx, article=False)
        if obj is None or obj[:1].isupper() and obj.split()[0] in NOT_NAMES:
            return []
        return [Relation(s, "is a", obj) for s in subject] + _continuation(
            after, "is a", subject, ctx
        )
    return []


def _has_role(text: str, subject: list[str], ctx: Context) -> list[Relation]:
    """``has a dog named Rex`` / ``have two kids, Ava and Ben`` / ``has a sister, Ana``."""
    noun, rest, current = role_phrase(text)
    if noun is None or not current:
        return []
    m = re.match(r",?\s*(?:(?:named|called)\s+|:\s*)?(.*)$", rest.strip())
    names = read_names(restore(m.group(1)) if m else "") if m else None
    if not names:
        return []
    return [role_edge(n, noun, s) for s in subject for n in names]


def _is_role(text: str, subject: list[str], ctx: Context) -> list[Relation] | None:
    """``is my manager`` / ``are Dana's kids`` / ``is my manager's husband``; None if not a role."""
    chain = owner_chain(text, ctx)
    if chain is None:
        return None
    owner, rest = chain
    noun, after, current = role_phrase(rest)
    if noun is None:
        return None
    if not current:
        return []
    return [role_edge(s, noun, owner) for s in subject if key(s) != key(owner)]


def _attribute(clause: str, ctx: Context) -> list[Relation] | None:
    """``My birthday is March 3`` / ``My favourite colour is green`` / ``My name is Sam``."""
    chain = owner_chain(clause, ctx)
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
        names = read_names(m.group(2))
        if not names:
            return []
        held = ROLE_WORDS.get(owner.rsplit("'s ", 1)[1]) if "'s " in owner else None
        if predicate == "named" and held is not None:
            # "My manager's name is Dana.": Dana holds the role.
            ctx.person = names[0]
            return [role_edge(n, held, owner_of(owner)) for n in names]
        return [Relation(owner, predicate, n) for n in names]
    if predicate == "car":
        value = m.group(2).strip()
        if _NOT_A_CAR.match(value) or not _CAR.match(value):
            return []  # "My car is red", "My car is in the shop": no car named
        car, _ = read_object(value, ctx, article=False)
        return [Relation(owner, "car", car)] if car else []
    if predicate.startswith("favorite"):
        values, _ = read_objects(m.group(2), ctx)
        return [Relation(owner, predicate, v) for v in values]
    value = clean_entity(re.split(r"[,;]", m.group(2))[0])
    if predicate == "birthday":
        value = re.sub(r"^(?:on\s+)?(?:the\s+)?", "", value, flags=re.I)
    if not value or len(value) > MAX_ENTITY_CHARS:
        return []
    return [Relation(owner, predicate, value)]


def _clause(clause: str, ctx: Context) -> list[Relation]:
    clause = LEAD_INS.sub("", clause.strip())
    if not clause or SKIP_START.match(clause) or NEGATED.search(clause) or HEDGED.search(clause):
        return []
    attribute = _attribute(clause, ctx)
    if attribute is not None:
        return attribute
    subject = read_subject(clause, ctx)
    if subject is None or not subject.entities:
        return []
    found = list(subject.extra)
    rest = subject.rest.strip()
    if rest.startswith("'s ") and len(subject.entities) == 1 and subject.extra:
        # "My sister Ana's birthday is May 3", "My sister Ana's husband is Lee": the
        # appositive's own attribute or role, read as a clause of its own.
        return found + _clause(subject.entities[0] + rest, ctx)
    person = subject.entities[0] if subject.is_person and len(subject.entities) == 1 else None
    if subject.role_of is not None:
        owner, noun = subject.role_of
        # "My manager is Dana." / "My kids are Ava and Ben." / "My manager's name is Dana."
        m = re.match(r"(?:'s\s+name\s+is|(?:is|are)(?:\s+(?:called|named))?)\s+(.*)$", rest, re.I)
        names = read_names(restore(m.group(1))) if m else None
        if names:
            ctx.person = names[0] if len(names) == 1 else ctx.person
            return found + [role_edge(n, noun, owner) for n in names]
    found += _predicates(rest, subject.entities, ctx)
    if person is not None and person != USER:
        ctx.person = person  # after the predicates: "Lee is her husband" means Dana's
    return found


def extract(text: str) -> list[Relation]:
    """The rules extractor: every relation the patterns find in ``text``, in order, once each."""
    ctx = Context()
    found: list[Relation] = []
    for sentence in sentences(text):
        for clause in CLAUSE_SPLIT.split(sentence):
            for relation in _clause(clause, ctx):
                relation = Relation(
                    clean_entity(relation.subject),
                    relation.predicate,
                    clean_entity(relation.object),
                )
                if valid(relation) and relation not in found:
                    found.append(relation)
    return found
