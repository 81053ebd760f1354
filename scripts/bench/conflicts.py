"""Contradiction benchmark: find_conflicts on 50 contradicting pairs among 5,000 other facts.

    python -m scripts.bench.conflicts [--pairs 50] [--others 5000] [--seed 7]
        [--workdir .bench/conflicts] [--json out.json]

Generates one person's store (:func:`store`): ``--pairs`` pairs of
contradicting personal facts (one fact, then a later one giving the same
single-valued thing another value: where the user lives, their car, partner,
employer, school, birthday, a favourite; or the same of a friend or relative),
worded differently from pair to pair and within a pair ("The user's car is
...", "I drive a ...", "User lives in ...", "I moved to ...", "My partner is
..."), both facts under the same topic tag. Around them ``--others``
realistic personal facts that contradict nothing: facts about a few hundred
other people (each with at most one home, employer, birthday, car, favourite
of a kind), facts of the user's that several values may hold at once (two
allergies, things owned, languages, likes), and everyday notes. The user's
facts are tagged by topic; facts about another person by that person
(``--tags person``, the default) or by topic (``--tags topic``); both facts
of a pair share their tag.

Then, through the real tools of a real server (``ownsona serve`` on the
embedded default, the local model, the in-process worker with the rules
extractor): stores everything with ``remember_batch`` over ``/mcp`` in
shuffled order, calls ``find_conflicts`` at its default threshold with
``max_groups`` 500 right away (some extraction jobs still queued: those
memories are read by the scan itself) and again once the worker is idle,
and prints, for each call, the pairs surfaced (both facts in one group; target
>= 45 of 50), the false groups (a group holding no seeded pair; target <= 10),
the groups by reason and the call's wall time. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.embedded import stop_embedded

from .core import Server
from .corpus import MONTHS
from .ingest_long import RssSampler, call, drained

_FIRST = [
    "Ana",
    "Ben",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kavya",
    "Liam",
    "Maya",
    "Nikolai",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sanjay",
    "Tomas",
    "Uma",
    "Viktor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Aaron",
    "Bianca",
    "Carlos",
    "Daria",
    "Emil",
    "Fatima",
    "Gustav",
    "Hana",
    "Ivan",
    "Julia",
    "Kenji",
    "Lucia",
    "Marco",
    "Nadia",
    "Oscar",
    "Priya",
    "Rafael",
    "Sofia",
    "Tariq",
    "Ursula",
    "Valentina",
    "Wiktor",
    "Yara",
    "Zara",
    "Amir",
    "Beatriz",
    "Cyrus",
    "Delia",
    "Esteban",
    "Freya",
    "Gabriel",
    "Helga",
    "Idris",
    "Jasmin",
]
_LAST = [
    "Silva",
    "Novak",
    "Okafor",
    "Tanaka",
    "Larsen",
    "Moreau",
    "Haddad",
    "Kowalski",
    "Rossi",
    "Nguyen",
    "Schmidt",
    "Patel",
    "Murphy",
    "Ivanova",
    "Costa",
    "Fischer",
    "Bauer",
    "Yilmaz",
    "Dubois",
    "Jensen",
    "Sato",
    "Kim",
    "Garcia",
    "Alvarez",
    "Brennan",
]
_ROLES = [
    "friend",
    "colleague",
    "cousin",
    "neighbour",
    "sister",
    "brother",
    "aunt",
    "uncle",
    "teammate",
    "classmate",
    "client",
    "mentor",
    "roommate",
    "coworker",
    "nephew",
    "niece",
]
_CITIES = [
    "Berlin",
    "Lisbon",
    "Porto",
    "Madrid",
    "Lyon",
    "Toronto",
    "Denver",
    "Austin",
    "Kyoto",
    "Osaka",
    "Seoul",
    "Hanoi",
    "Nairobi",
    "Accra",
    "Lima",
    "Quito",
    "Oslo",
    "Bergen",
    "Tallinn",
    "Riga",
    "Vilnius",
    "Krakow",
    "Gdansk",
    "Brno",
    "Graz",
    "Zurich",
    "Geneva",
    "Utrecht",
    "Ghent",
    "Leeds",
    "Bristol",
    "Glasgow",
    "Cork",
    "Galway",
    "Reykjavik",
    "Valencia",
    "Seville",
    "Bologna",
    "Turin",
    "Naples",
    "Athens",
    "Izmir",
    "Tbilisi",
    "Yerevan",
    "Almaty",
    "Pune",
    "Chennai",
    "Perth",
    "Adelaide",
    "Auckland",
    "Wellington",
    "Montreal",
    "Halifax",
    "Calgary",
    "Portland",
    "Boise",
    "Tucson",
    "Raleigh",
    "Savannah",
    "Halle",
    "Leipzig",
    "Dresden",
    "Bremen",
]
_COMPANIES = [
    "Siemens", "Shopify", "Stripe", "Spotify", "Airbus", "Philips", "Unilever", "Nokia",
    "Ericsson", "Zalando", "Canva", "Atlassian", "Figma", "Notion", "Deloitte", "Accenture",
    "the BBC", "the city council", "a small bakery", "Mercy Hospital", "Lakeside High School",
    "a law firm downtown", "the public library", "Patagonia", "IKEA", "Lego", "Novartis",
    "Roche", "Bosch", "Rakuten", "Mozilla", "Wikimedia", "the Red Cross", "a local brewery",
]  # fmt: skip
_SCHOOLS = ["MIT", "Stanford", "Oxford", "Yale", "ETH Zurich", "McGill", "the Sorbonne",
            "Kyoto University", "UCLA", "Trinity College Dublin"]  # fmt: skip
_CARS = [
    "Honda Civic", "Tesla Model 3", "Toyota Corolla", "Subaru Outback", "Volkswagen Golf",
    "Ford Focus", "Mazda CX-5", "Kia Niro", "Volvo XC40", "Hyundai Ioniq", "Skoda Octavia",
    "Renault Clio", "Fiat Panda", "BMW i3", "Nissan Leaf", "Peugeot 208", "Audi A4",
]  # fmt: skip
_COLOURS = ["red", "blue", "green", "black", "white", "silver", "grey", "yellow"]
_FAVOURITES = {
    "colour": ["green", "blue", "purple", "orange", "teal", "yellow", "red", "navy"],
    "food": ["sushi", "lasagna", "ramen", "tacos", "paella", "dumplings", "pho", "curry"],
    "movie": ["Alien", "Amelie", "Heat", "Spirited Away", "Jaws", "Casablanca", "Arrival"],
    "book": ["Dune", "Middlemarch", "Beloved", "Emma", "Ulysses", "Rebecca", "Persuasion"],
    "band": ["Radiohead", "ABBA", "Queen", "Portishead", "Blur", "Massive Attack"],
    "sport": ["tennis", "rugby", "cricket", "volleyball", "badminton", "handball"],
    "drink": ["espresso", "green tea", "lemonade", "kombucha", "chai", "cold brew"],
    "season": ["autumn", "spring", "winter", "summer"],
    "city": ["Rome", "Vienna", "Prague", "Kyoto", "Lisbon", "Istanbul"],
    "animal": ["otter", "fox", "owl", "penguin", "red panda", "octopus"],
}
_ALLERGENS = ["peanuts", "shellfish", "penicillin", "cat dander", "pollen", "latex", "sesame"]
_HOBBIES = [
    "bouldering", "sourdough baking", "birdwatching", "pottery", "trail running", "chess",
    "salsa dancing", "woodworking", "film photography", "sea kayaking", "knitting",
    "board games", "gardening", "calligraphy", "open-water swimming", "jazz piano",
]  # fmt: skip
_LANGUAGES = ["Spanish", "French", "Japanese", "German", "Portuguese", "Korean", "Italian"]
_OWNED = [
    "a road bike", "a sailboat", "a record player", "a 3D printer", "a telescope",
    "a standing desk", "a cast-iron skillet", "an e-reader", "a drone", "a sewing machine",
]  # fmt: skip
#: Share of the other facts that are about other people (the rest are the user's own).
PEOPLE_SHARE = 0.9
_PETS = [
    "Biscuit",
    "Pepper",
    "Mochi",
    "Juniper",
    "Rex",
    "Luna",
    "Olive",
    "Ziggy",
    "Noodle",
    "Clementine",
]


@dataclass(frozen=True)
class Fact:
    text: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    first: Fact
    second: Fact
    slot: str


def _date(rng: random.Random) -> str:
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
    a, b = _two(rng, _CITIES)
    out.append(
        Pair(
            Fact(rng.choice([f"I live in {a}.", f"User lives in {a}.", f"I'm based in {a}."]), ("home",)),
            Fact(rng.choice([f"I moved to {b} last month.", f"I live in {b} now.", f"The user lives in {b}."]), ("home",)),
            "user lives in",
        )
    )  # fmt: skip
    a, b = _two(rng, _COMPANIES[:16])
    out.append(
        Pair(
            Fact(rng.choice([f"I work at {a}.", f"User works at {a} as a designer."]), ("work",)),
            Fact(rng.choice([f"I work for {b}.", f"I got a new job at {b}."]), ("work",)),
            "user works at",
        )
    )  # fmt: skip
    (ca, cb), (ka, kb) = _two(rng, _CARS), _two(rng, _COLOURS)
    ya, yb = rng.randint(2010, 2023), rng.randint(2010, 2023)
    out.append(
        Pair(
            Fact(f"The user's car is a {ka} {ya} {ca}.", ("car",)),
            Fact(rng.choice([f"The user's car is a {kb} {yb} {cb}.", f"I drive a {cb}.", f"My car is a {kb} {cb}."]), ("car",)),
            "user car",
        )
    )  # fmt: skip
    a, b = rng.sample(_FIRST, 2)
    out.append(
        Pair(
            Fact(rng.choice([f"My partner is {a}.", f"I'm married to {a}."]), ("family",)),
            Fact(rng.choice([f"My wife is {b}.", f"My husband, {b}, is a nurse.", f"My partner is {b}."]), ("family",)),
            "user partner",
        )
    )  # fmt: skip
    out.append(
        Pair(
            Fact(f"My birthday is {_date(rng)}.", ("birthdays",)),
            Fact(rng.choice([f"The user's birthday is {_date(rng)}.", f"I was born on {_date(rng)} 1990."]), ("birthdays",)),
            "user birthday",
        )
    )  # fmt: skip
    a, b = _two(rng, _SCHOOLS)
    out.append(
        Pair(
            Fact(f"I study computer science at {a}.", ("school",)),
            Fact(rng.choice([f"I am a student at {b}.", f"I'm studying economics at {b}."]), ("school",)),
            "user studies at",
        )
    )  # fmt: skip
    for thing in ("colour", "food", "movie", "book", "band", "sport", "drink", "season"):
        a, b = _two(rng, _FAVOURITES[thing])
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
        a, b = _two(rng, _CITIES)
        return Pair(
            Fact(f"My {role} {name} lives in {a}.", (tag,)),
            Fact(rng.choice([f"{name} moved to {b}.", f"{name} lives in {b} these days."]), (tag,)),
            f"{name} lives in",
        )  # fmt: skip
    if kind == "works at":
        a, b = _two(rng, _COMPANIES)
        return Pair(
            Fact(f"My {role} {name} works at {a}.", ("work",)),
            Fact(rng.choice([f"{name} works for {b}.", f"{name} got a job at {b}."]), ("work",)),
            f"{name} works at",
        )  # fmt: skip
    if kind == "birthday":
        return Pair(
            Fact(f"{name}'s birthday is {_date(rng)}.", ("birthdays",)),
            Fact(f"My {role} {name}'s birthday is {_date(rng)}.", ("birthdays",)),
            f"{name} birthday",
        )  # fmt: skip
    if kind == "car":
        a, b = _two(rng, _CARS)
        return Pair(
            Fact(f"{name} drives a {rng.choice(_COLOURS)} {a}.", ("car",)),
            Fact(f"{name}'s car is a {b}.", ("car",)),
            f"{name} car",
        )  # fmt: skip
    thing = rng.choice(sorted(_FAVOURITES))
    a, b = _two(rng, _FAVOURITES[thing])
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
        ("lives in", Fact(rng.choice([f"My {role} {name} lives in {rng.choice(_CITIES)}.", f"{name} has lived in {rng.choice(_CITIES)} since {rng.randint(1995, 2022)}."]), (tag,))),
        ("works at", Fact(f"{name} works at {rng.choice(_COMPANIES)} as a {rng.choice(['nurse', 'chef', 'teacher', 'data analyst', 'architect', 'pilot', 'translator', 'welder'])}.", ("work",))),
        ("birthday", Fact(f"{name}'s birthday is {_date(rng)}, so I should plan something.", ("birthdays",))),
        ("car", Fact(f"{name} drives a {rng.choice(_COLOURS)} {rng.choice(_CARS)} that is always spotless.", ("car",))),
        ("favourite", Fact(f"{name}'s favourite {(t := rng.choice(sorted(_FAVOURITES)))} is {rng.choice(_FAVOURITES[t])}.", ("preferences",))),
        ("allergy", Fact(f"{name} is allergic to {rng.choice(_ALLERGENS)}; keep it out of the food when {first} visits.", ("health",))),
        ("hobby", Fact(f"{name} loves {rng.choice(_HOBBIES)} and {rng.choice(_HOBBIES)}.", ("hobbies",))),
        ("language", Fact(f"{name} speaks {rng.choice(_LANGUAGES)} fluently.", (tag,))),
        ("pet", Fact(f"{name} has a dog named {rng.choice(_PETS)}.", ("pets",))),
        ("met", Fact(f"I met {name} at a {rng.choice(['wedding', 'conference', 'climbing gym', 'book club', 'hackathon', 'concert'])} in {rng.randint(2005, 2024)}.", (tag,))),
        ("gift", Fact(f"Gift idea for {name}: {rng.choice(_OWNED)[2:]} or anything about {rng.choice(_HOBBIES)}.", ("gifts",))),
    ]  # fmt: skip
    picked = [fact for slot, fact in options if slot != skip]
    rng.shuffle(picked)
    return [Fact(f"{name} is my {role}.", (tag,)), *picked[: rng.randint(4, 8)]]


def _user_facts(rng: random.Random, n: int, people: list[str]) -> list[Fact]:
    """Facts of the user's that hold several values at once, and everyday notes."""
    out: list[Fact] = []
    for allergen in rng.sample(_ALLERGENS, 3):
        out.append(Fact(rng.choice([f"I'm allergic to {allergen}.", f"The user is allergic to {allergen}."]), ("health",)))  # fmt: skip
    for thing in _OWNED:
        out.append(Fact(f"I own {thing}.", ("home",)))
    for language in rng.sample(_LANGUAGES, 3):
        out.append(Fact(f"I speak {language}.", ("languages",)))
    for hobby in _HOBBIES:
        out.append(Fact(f"I enjoy {hobby} on weekends.", ("hobbies",)))
    places = [*_CITIES, *_FAVOURITES["city"]]
    templates = [
        ("travel", lambda: f"Trip note: in {rng.choice(places)} I loved the {rng.choice(['markets', 'museums', 'coffee', 'harbour', 'old town', 'street food', 'bookshops', 'night trains'])} and want to go back with {rng.choice(people)}."),
        ("travel", lambda: f"I want to see {rng.choice(places)} during {rng.choice(_FAVOURITES['season'])} and try {rng.choice(_HOBBIES)} there."),
        ("food", lambda: f"{rng.choice(people)} took me to a {rng.choice(['Georgian', 'Ethiopian', 'Peruvian', 'Sichuan', 'Lebanese', 'Basque', 'Oaxacan', 'Keralan'])} place near {rng.choice(['the harbour', 'the station', 'the old market', 'the river'])} and the {rng.choice(['lamb', 'dumplings', 'ceviche', 'flatbread', 'stew', 'mole', 'dosa'])} was superb."),
        ("health", lambda: f"My {rng.choice(['physio', 'dentist', 'optician', 'dermatologist'])} suggested {rng.choice(['more stretching', 'a softer toothbrush', 'blue-light glasses', 'a new sunscreen', 'less coffee', 'earlier nights'])} after the {rng.choice(MONTHS)} visit."),
        ("work", lambda: f"Project {rng.choice(['Falcon', 'Juniper', 'Atlas', 'Harbor', 'Nimbus', 'Quill', 'Tundra', 'Saffron', 'Orbit'])} needs a {rng.choice(['budget', 'design review', 'launch plan', 'migration', 'security audit', 'hiring plan'])} from {rng.choice(people)} before the {rng.choice(['offsite', 'board meeting', 'release', 'audit', 'holidays'])}."),
        ("hobbies", lambda: f"Book club picked {rng.choice(_FAVOURITES['book'])}; {rng.choice(people)} hosts and I bring {rng.choice(['olives', 'a cake', 'wine', 'cheese', 'flatbread', 'lemonade'])}."),
        ("preferences", lambda: f"I prefer {rng.choice(['aisle seats', 'window seats', 'morning meetings', 'oat milk', 'dark mode', 'paper notebooks', 'early flights', 'quiet carriages', 'handwritten cards'])} {rng.choice(['when travelling', 'at work', 'most days', 'if possible', 'in winter', 'with clients'])}."),
        ("home", lambda: f"The {rng.choice(['boiler', 'dishwasher', 'road bike', 'roof gutter', 'laptop battery', 'smoke alarm', 'balcony door', 'washing machine'])} needs {rng.choice(['servicing', 'a new part', 'checking', 'replacing', 'cleaning'])}; {rng.choice(people)} knows a good {rng.choice(['plumber', 'electrician', 'repair shop', 'carpenter'])}."),
        ("hobbies", lambda: f"I ran the {rng.choice(['riverside 10k', 'hill relay', 'forest trail race', 'city half marathon', 'beach 5k'])} with {rng.choice(people)} and we finished {rng.choice(['in the rain', 'at sunrise', 'holding hands', 'last', 'near the front'])}."),
        ("gifts", lambda: f"For {rng.choice(people)}'s {rng.choice(['housewarming', 'graduation', 'retirement', 'baby shower', 'promotion'])} I bought {rng.choice(_OWNED)}."),
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
    people = [f"{f} {last}" for f in _FIRST for last in _LAST]
    rng.shuffle(people)
    seeded = _user_pairs(rng)[:pairs]
    kinds = ["lives in", "works at", "birthday", "car", "favourite"]
    facts: list[Fact] = []
    person = 0
    while len(seeded) < pairs:
        name, role = people[person], rng.choice(_ROLES)
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
        name, role = people[person], rng.choice(_ROLES)
        person += 1
        own = _person_facts(rng, name, role, None)
        facts += _by_person(name, own) if person_tags else own
    facts = list({f.text: f for f in facts}.values())[: int(others * PEOPLE_SHARE)]  # distinct
    facts += _user_facts(rng, others - len(facts), people[:person])
    texts = {f.text for f in facts}
    assert len(texts) == len(facts) == others, "every fact distinct"
    assert not texts & {f.text for p in seeded for f in (p.first, p.second)}
    return seeded, facts


def score(groups: list[dict[str, Any]], pair_ids: list[tuple[int, int]]) -> dict[str, Any]:
    member = {i: n for n, g in enumerate(groups) for i in g["ids"]}
    surfaced = sum(1 for a, b in pair_ids if a in member and member.get(a) == member.get(b))
    holding = {member[a] for a, b in pair_ids if a in member and member[a] == member.get(b)}
    false = [g for n, g in enumerate(groups) if n not in holding]
    reasons: dict[str, int] = {}
    for g in groups:
        reasons[g.get("reason", "?")] = reasons.get(g.get("reason", "?"), 0) + 1
    return {
        "pairs_surfaced": surfaced,
        "pairs": len(pair_ids),
        "false_groups": len(false),
        "groups": len(groups),
        "groups_by_reason": reasons,
        "largest_group": max((len(g["ids"]) for g in groups), default=0),
        "false_group_examples": [[m["text"] for m in g["memories"][:3]] for g in false[:5]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--others", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", default=".bench/conflicts")
    parser.add_argument(
        "--tags",
        choices=("person", "topic"),
        default="person",
        help="tag facts about other people with the person (default) or with their topic",
    )
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    if (workdir / "data").exists():
        stop_embedded(workdir / "data")
        shutil.rmtree(workdir / "data")  # a fresh store each run
    workdir.mkdir(parents=True, exist_ok=True)

    pairs, others = store(args.pairs, args.others, args.seed, person_tags=args.tags == "person")
    rng = random.Random(args.seed + 1)
    # (fact, its pair's number, 0 first / 1 second), or (fact, None, None).
    items: list[tuple[Fact, int | None, int | None]] = [
        (f, n, side) for n, p in enumerate(pairs) for side, f in enumerate((p.first, p.second))
    ]
    items += [(f, None, None) for f in others]
    # Shuffled, but each pair's second fact after its first (a later statement).
    rng.shuffle(items)
    firsts = {n: k for k, (_f, n, side) in enumerate(items) if side == 0}
    for k, (_f, n, side) in enumerate(items):
        if side == 1 and firsts[n] > k:
            items[k], items[firsts[n]] = items[firsts[n]], items[k]
            firsts[n] = k

    server = Server(workdir)
    server.start()
    assert server.proc is not None
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "pairs": len(pairs),
        "others": len(others),
        "seed": args.seed,
        "tags": args.tags,
    }
    try:
        ids: list[int] = []
        started = time.perf_counter()
        for b in range(0, len(items), 200):
            batch = items[b : b + 200]
            payload, _s = call(
                server,
                "remember_batch",
                {
                    "items": [{"text": f.text, "tags": list(f.tags)} for f, _n, _side in batch],
                    "dedup_policy": "insert",
                },
            )
            if not payload.get("ok") or payload["summary"]["failed"]:
                raise SystemExit(f"remember_batch failed: {payload}")
            ids += [r["memory_id"] for r in payload["results"]]
        results["ingest_s"] = round(time.perf_counter() - started, 1)
        where = {(n, side): ids[k] for k, (_f, n, side) in enumerate(items) if n is not None}
        pair_ids = [(where[(n, 0)], where[(n, 1)]) for n in range(len(pairs))]
        for label in ("right_after_ingest", "after_extraction"):
            if label == "after_extraction":
                with RssSampler(server.proc.pid) as sampler:
                    results["drain_s"] = round(drained(server, sampler, quiet_s=3, most_s=900), 1)
            times = []
            for _ in range(3):
                payload, seconds = call(server, "find_conflicts", {"max_groups": 500})
                times.append(seconds)
            if not payload.get("ok"):
                raise SystemExit(f"find_conflicts failed: {payload}")
            results[label] = {
                "threshold": payload["threshold"],
                "median_s": round(statistics.median(times), 2),
                **score(payload["groups"], pair_ids),
            }
            missed = [
                (pairs[n].first.text, pairs[n].second.text)
                for n, (a, b) in enumerate(pair_ids)
                if not any(a in g["ids"] and b in g["ids"] for g in payload["groups"])
            ]
            results[label]["missed_examples"] = missed[:5]
            print(json.dumps({label: results[label]}, indent=2), flush=True)
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
