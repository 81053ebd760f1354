"""The contradiction benchmark's store: seeded contradicting pairs among facts that contradict nothing.

:func:`store` is deterministic for a seed; ``scripts.bench.conflicts`` documents
what it generates and runs it through a real server.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from .conflict_words import (
    ALLERGENS,
    CARS,
    CITIES,
    COLOURS,
    COMPANIES,
    FAVOURITES,
    FIRST,
    HOBBIES,
    LANGUAGES,
    LAST,
    OWNED,
    PETS,
    ROLES,
    SCHOOLS,
)
from .corpus import MONTHS

#: Share of the other facts that are about other people (the rest are the user's own).
PEOPLE_SHARE = 0.9


@dataclass(frozen=True)
class Fact:
    text: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    first: Fact
    second: Fact
    slot: str


def date_phrase(rng: random.Random) -> str:
    month, day = rng.choice(MONTHS), rng.randint(1, 28)
    return rng.choice([f"{month} {day}", f"{day} {month}", f"the {_ordinal(day)} of {month}"])


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _two(rng: random.Random, values: list[str]) -> tuple[str, str]:
    a, b = rng.sample(values, 2)
    return a, b


def _user_pairs(rng: random.Random) -> list[Pair]:
    """Contradictions about the user, one per single-valued slot, wordings varied."""
    out: list[Pair] = []
    a, b = _two(rng, CITIES)
    out.append(
        Pair(
            Fact(rng.choice([f"I live in {a}.", f"User lives in {a}.", f"I'm based in {a}."]), ("home",)),
            Fact(rng.choice([f"I moved to {b} last month.", f"I live in {b} now.", f"The user lives in {b}."]), ("home",)),
            "user lives in",
        )
    )  # fmt: skip
    a, b = _two(rng, COMPANIES[:16])
    out.append(
        Pair(
            Fact(rng.choice([f"I work at {a}.", f"User works at {a} as a designer."]), ("work",)),
            Fact(rng.choice([f"I work for {b}.", f"I got a new job at {b}."]), ("work",)),
            "user works at",
        )
    )  # fmt: skip
    (ca, cb), (ka, kb) = _two(rng, CARS), _two(rng, COLOURS)
    ya, yb = rng.randint(2010, 2023), rng.randint(2010, 2023)
    out.append(
        Pair(
            Fact(f"The user's car is a {ka} {ya} {ca}.", ("car",)),
            Fact(rng.choice([f"The user's car is a {kb} {yb} {cb}.", f"I drive a {cb}.", f"My car is a {kb} {cb}."]), ("car",)),
            "user car",
        )
    )  # fmt: skip
    a, b = rng.sample(FIRST, 2)
    out.append(
        Pair(
            Fact(rng.choice([f"My partner is {a}.", f"I'm married to {a}."]), ("family",)),
            Fact(rng.choice([f"My wife is {b}.", f"My husband, {b}, is a nurse.", f"My partner is {b}."]), ("family",)),
            "user partner",
        )
    )  # fmt: skip
    out.append(
        Pair(
            Fact(f"My birthday is {date_phrase(rng)}.", ("birthdays",)),
            Fact(rng.choice([f"The user's birthday is {date_phrase(rng)}.", f"I was born on {date_phrase(rng)} 1990."]), ("birthdays",)),
            "user birthday",
        )
    )  # fmt: skip
    a, b = _two(rng, SCHOOLS)
    out.append(
        Pair(
            Fact(f"I study computer science at {a}.", ("school",)),
            Fact(rng.choice([f"I am a student at {b}.", f"I'm studying economics at {b}."]), ("school",)),
            "user studies at",
        )
    )  # fmt: skip
    for thing in ("colour", "food", "movie", "book", "band", "sport", "drink", "season"):
        a, b = _two(rng, FAVOURITES[thing])
        first = rng.choice(
            [f"My favourite {thing} is {a}.", f"The user's favorite {thing} is {a}."]
        )
        second = rng.choice([f"My favorite {thing} is {b}.", f"User's favourite {thing} is {b}."])
        out.append(Pair(Fact(first, ("preferences",)), Fact(second, ("preferences",)), f"user favourite {thing}"))  # fmt: skip
    return out


def _person_pair(rng: random.Random, name: str, role: str, kind: str) -> Pair:
    """A contradiction about someone else (one slot of theirs, two values)."""
    tag = (
        "family"
        if role in ("cousin", "sister", "brother", "aunt", "uncle", "nephew", "niece")
        else "friends"
    )
    if kind == "lives in":
        a, b = _two(rng, CITIES)
        return Pair(
            Fact(f"My {role} {name} lives in {a}.", (tag,)),
            Fact(rng.choice([f"{name} moved to {b}.", f"{name} lives in {b} these days."]), (tag,)),
            f"{name} lives in",
        )  # fmt: skip
    if kind == "works at":
        a, b = _two(rng, COMPANIES)
        return Pair(
            Fact(f"My {role} {name} works at {a}.", ("work",)),
            Fact(rng.choice([f"{name} works for {b}.", f"{name} got a job at {b}."]), ("work",)),
            f"{name} works at",
        )  # fmt: skip
    if kind == "birthday":
        return Pair(
            Fact(f"{name}'s birthday is {date_phrase(rng)}.", ("birthdays",)),
            Fact(f"My {role} {name}'s birthday is {date_phrase(rng)}.", ("birthdays",)),
            f"{name} birthday",
        )  # fmt: skip
    if kind == "car":
        a, b = _two(rng, CARS)
        return Pair(
            Fact(f"{name} drives a {rng.choice(COLOURS)} {a}.", ("car",)),
            Fact(f"{name}'s car is a {b}.", ("car",)),
            f"{name} car",
        )  # fmt: skip
    thing = rng.choice(sorted(FAVOURITES))
    a, b = _two(rng, FAVOURITES[thing])
    return Pair(
        Fact(f"{name}'s favourite {thing} is {a}.", ("preferences",)),
        Fact(f"My {role} {name}'s favorite {thing} is {b}.", ("preferences",)),
        f"{name} favourite {thing}",
    )  # fmt: skip


def _person_facts(rng: random.Random, name: str, role: str, skip: str | None) -> list[Fact]:
    """A few facts about one other person: at most one value per single-valued slot."""
    tag = (
        "family"
        if role in ("cousin", "sister", "brother", "aunt", "uncle", "nephew", "niece")
        else "friends"
    )
    first = name.split()[0]
    options = [
        ("lives in", Fact(rng.choice([f"My {role} {name} lives in {rng.choice(CITIES)}.", f"{name} has lived in {rng.choice(CITIES)} since {rng.randint(1995, 2022)}."]), (tag,))),
        ("works at", Fact(f"{name} works at {rng.choice(COMPANIES)} as a {rng.choice(['nurse', 'chef', 'teacher', 'data analyst', 'architect', 'pilot', 'translator', 'welder'])}.", ("work",))),
        ("birthday", Fact(f"{name}'s birthday is {date_phrase(rng)}, so I should plan something.", ("birthdays",))),
        ("car", Fact(f"{name} drives a {rng.choice(COLOURS)} {rng.choice(CARS)} that is always spotless.", ("car",))),
        ("favourite", Fact(f"{name}'s favourite {(t := rng.choice(sorted(FAVOURITES)))} is {rng.choice(FAVOURITES[t])}.", ("preferences",))),
        ("allergy", Fact(f"{name} is allergic to {rng.choice(ALLERGENS)}; keep it out of the food when {first} visits.", ("health",))),
        ("hobby", Fact(f"{name} loves {rng.choice(HOBBIES)} and {rng.choice(HOBBIES)}.", ("hobbies",))),
        ("language", Fact(f"{name} speaks {rng.choice(LANGUAGES)} fluently.", (tag,))),
        ("pet", Fact(f"{name} has a dog named {rng.choice(PETS)}.", ("pets",))),
        ("met", Fact(f"I met {name} at a {rng.choice(['wedding', 'conference', 'climbing gym', 'book club', 'hackathon', 'concert'])} in {rng.randint(2005, 2024)}.", (tag,))),
        ("gift", Fact(f"Gift idea for {name}: {rng.choice(OWNED)[2:]} or anything about {rng.choice(HOBBIES)}.", ("gifts",))),
    ]  # fmt: skip
    picked = [fact for slot, fact in options if slot != skip]
    rng.shuffle(picked)
    return [Fact(f"{name} is my {role}.", (tag,)), *picked[: rng.randint(4, 8)]]


def _user_facts(rng: random.Random, n: int, people: list[str]) -> list[Fact]:
    """Facts of the user's that hold several values at once, and everyday notes."""
    out: list[Fact] = []
    for allergen in rng.sample(ALLERGENS, 3):
        out.append(Fact(rng.choice([f"I'm allergic to {allergen}.", f"The user is allergic to {allergen}."]), ("health",)))  # fmt: skip
    for thing in OWNED:
        out.append(Fact(f"I own {thing}.", ("home",)))
    for language in rng.sample(LANGUAGES, 3):
        out.append(Fact(f"I speak {language}.", ("languages",)))
    for hobby in HOBBIES:
        out.append(Fact(f"I enjoy {hobby} on weekends.", ("hobbies",)))
    places = [*CITIES, *FAVOURITES["city"]]
    templates: list[tuple[str, Callable[[], str]]] = [
        ("travel", lambda: f"Trip note: in {rng.choice(places)} I loved the {rng.choice(['markets', 'museums', 'coffee', 'harbour', 'old town', 'street food', 'bookshops', 'night trains'])} and want to go back with {rng.choice(people)}."),
        ("travel", lambda: f"I want to see {rng.choice(places)} during {rng.choice(FAVOURITES['season'])} and try {rng.choice(HOBBIES)} there."),
        ("food", lambda: f"{rng.choice(people)} took me to a {rng.choice(['Georgian', 'Ethiopian', 'Peruvian', 'Sichuan', 'Lebanese', 'Basque', 'Oaxacan', 'Keralan'])} place near {rng.choice(['the harbour', 'the station', 'the old market', 'the river'])} and the {rng.choice(['lamb', 'dumplings', 'ceviche', 'flatbread', 'stew', 'mole', 'dosa'])} was superb."),
        ("health", lambda: f"My {rng.choice(['physio', 'dentist', 'optician', 'dermatologist'])} suggested {rng.choice(['more stretching', 'a softer toothbrush', 'blue-light glasses', 'a new sunscreen', 'less coffee', 'earlier nights'])} after the {rng.choice(MONTHS)} visit."),
        ("work", lambda: f"Project {rng.choice(['Falcon', 'Juniper', 'Atlas', 'Harbor', 'Nimbus', 'Quill', 'Tundra', 'Saffron', 'Orbit'])} needs a {rng.choice(['budget', 'design review', 'launch plan', 'migration', 'security audit', 'hiring plan'])} from {rng.choice(people)} before the {rng.choice(['offsite', 'board meeting', 'release', 'audit', 'holidays'])}."),
        ("hobbies", lambda: f"Book club picked {rng.choice(FAVOURITES['book'])}; {rng.choice(people)} hosts and I bring {rng.choice(['olives', 'a cake', 'wine', 'cheese', 'flatbread', 'lemonade'])}."),
        ("preferences", lambda: f"I prefer {rng.choice(['aisle seats', 'window seats', 'morning meetings', 'oat milk', 'dark mode', 'paper notebooks', 'early flights', 'quiet carriages', 'handwritten cards'])} {rng.choice(['when travelling', 'at work', 'most days', 'if possible', 'in winter', 'with clients'])}."),
        ("home", lambda: f"The {rng.choice(['boiler', 'dishwasher', 'road bike', 'roof gutter', 'laptop battery', 'smoke alarm', 'balcony door', 'washing machine'])} needs {rng.choice(['servicing', 'a new part', 'checking', 'replacing', 'cleaning'])}; {rng.choice(people)} knows a good {rng.choice(['plumber', 'electrician', 'repair shop', 'carpenter'])}."),
        ("hobbies", lambda: f"I ran the {rng.choice(['riverside 10k', 'hill relay', 'forest trail race', 'city half marathon', 'beach 5k'])} with {rng.choice(people)} and we finished {rng.choice(['in the rain', 'at sunrise', 'holding hands', 'last', 'near the front'])}."),
        ("gifts", lambda: f"For {rng.choice(people)}'s {rng.choice(['housewarming', 'graduation', 'retirement', 'baby shower', 'promotion'])} I bought {rng.choice(OWNED)}."),
    ]  # fmt: skip
    seen = {f.text for f in out}
    while len(out) < n:
        tag, make = rng.choice(templates)
        text = make()
        if text not in seen:
            seen.add(text)
            out.append(Fact(text, (tag,)))
    return out


def _by_person(name: str, facts: list[Fact]) -> list[Fact]:
    """The facts tagged with the person they are about (``ana-silva``), as assistants often do."""
    return [Fact(f.text, ("-".join(name.lower().split()),)) for f in facts]


def store(
    pairs: int, others: int, seed: int, *, person_tags: bool = True
) -> tuple[list[Pair], list[Fact]]:
    """``pairs`` contradicting pairs and ``others`` facts contradicting nothing, deterministic.

    ``person_tags``: facts about another person are tagged with that person
    (else with their topic, like the user's own facts).
    """
    rng = random.Random(seed)
    people = [f"{f} {last}" for f in FIRST for last in LAST]
    rng.shuffle(people)
    seeded = _user_pairs(rng)[:pairs]
    kinds = ["lives in", "works at", "birthday", "car", "favourite"]
    facts: list[Fact] = []
    person = 0
    while len(seeded) < pairs:
        name, role = people[person], rng.choice(ROLES)
        person += 1
        kind = kinds[len(seeded) % len(kinds)]
        pair = _person_pair(rng, name, role, kind)
        own = _person_facts(rng, name, role, kind)[:3]
        if person_tags:
            first, second = _by_person(name, [pair.first, pair.second])
            pair, own = Pair(first, second, pair.slot), _by_person(name, own)
        seeded.append(pair)
        # The person's other facts, without a second value for the contradicted slot.
        facts += own
    while len({f.text for f in facts}) < others * PEOPLE_SHARE:
        name, role = people[person], rng.choice(ROLES)
        person += 1
        own = _person_facts(rng, name, role, None)
        facts += _by_person(name, own) if person_tags else own
    facts = list({f.text: f for f in facts}.values())[: int(others * PEOPLE_SHARE)]  # distinct
    facts += _user_facts(rng, others - len(facts), people[:person])
    texts = {f.text for f in facts}
    assert len(texts) == len(facts) == others, "every fact distinct"
    assert not texts & {f.text for p in seeded for f in (p.first, p.second)}
    return seeded, facts
