"""Varied personal-fact sentences (with tags) for the scan benchmark (``scans.py``).

``facts(n, seed)`` returns ``n`` distinct memory-like sentences drawn from
about forty templates over a few thousand names, places, employers, foods,
hobbies and details, so that embeddings spread over many topics the way a
real personal store does. About ``NEAR_DUPLICATE_SHARE`` of them are light
rewrites of an earlier sentence (a synonym, a tense, a reordered clause),
which is what ``find_near_duplicates`` exists to catch; a little more share
a topic and a tag with different details, which is what ``find_conflicts``
looks for. Deterministic for a given seed.
"""

from __future__ import annotations

import random

#: Share of sentences that rewrite an earlier one lightly.
NEAR_DUPLICATE_SHARE = 0.04

_FIRST = (
    "Ana Ben Chris Dana Eli Farah Gus Hana Ivan Jade Kai Lena Milo Nora Omar Pia Quinn Rosa "
    "Sami Tara Uma Vik Wren Xena Yuri Zoe Aiden Bea Caleb Dev Esme Finn Gia Hugo Iris Jonas "
    "Kira Leo Maya Nico Olga Paulo Rhea Sven Theo Una Vera Will Yara Zack Amir Bruno Cleo "
    "Dario Elsa Felix Greta Hiro Ines Joel Kofi Lila Mateo Nadia Oscar Priya Rafael Sofia "
    "Tomas Ulla Viktor Wanda Ximena Yusuf Zara"
).split()
_LAST = (
    "Silva Chen Novak Okafor Duarte Kim Berg Rossi Haddad Patel Moreau Lindqvist Tanaka "
    "Garcia Fischer Nowak Costa Ibrahim Walsh Ortiz Keller Sato Brennan Quist Varga Mensah"
).split()
_ROLES = (
    "sister brother son daughter mother father wife husband partner cousin aunt uncle "
    "niece nephew grandmother grandfather manager colleague friend neighbour roommate "
    "mentor doctor dentist therapist landlord coach"
).split()
_CITIES = (
    "Lisbon Porto Berlin Munich Hamburg Paris Lyon Madrid Valencia Rome Milan Vienna Prague "
    "Warsaw Krakow Oslo Stockholm Helsinki Copenhagen Dublin Cork Edinburgh Glasgow London "
    "Leeds Boston Denver Austin Seattle Portland Chicago Toronto Montreal Vancouver Tokyo "
    "Osaka Seoul Taipei Singapore Sydney Melbourne Auckland Nairobi Lagos Accra Cairo Tunis "
    "Istanbul Athens Sofia Bucharest Budapest Zagreb Ljubljana Tallinn Riga Vilnius Reykjavik "
    "Lima Bogota Santiago Montevideo Quito Havana Mexico City Oaxaca"
).split()
_EMPLOYERS = (
    "Acme Corp|Initech|Globex|Umbrella Labs|Stark Industries|Wayne Enterprises|Hooli|"
    "Pied Piper|Vandelay Imports|Soylent Foods|Tyrell Systems|Cyberdyne|Wonka Industries|"
    "the city hospital|a small design studio|the public library|a bakery downtown|"
    "the university|a logistics startup|the regional bank|a climate nonprofit|"
    "the local school district|a game studio|an architecture firm|the airport"
).split("|")
_JOBS = (
    "software engineer|nurse|teacher|data analyst|product manager|carpenter|chef|"
    "graphic designer|accountant|pharmacist|architect|paramedic|lawyer|translator|"
    "electrician|journalist|physiotherapist|researcher|pilot|librarian"
).split("|")
_FOODS = (
    "oat milk|dark chocolate|spicy ramen|green tea|black coffee|sourdough bread|"
    "pistachio ice cream|fresh figs|grilled sardines|pad thai|mushroom risotto|falafel|"
    "blue cheese|sparkling water|red wine|mango lassi|peanut butter|kimchi|olives|"
    "lemon tart|strawberries|cilantro|anchovies|licorice|oysters|tofu|paneer|pho"
).split("|")
_HOBBIES = (
    "bouldering|trail running|sourdough baking|birdwatching|chess|salsa dancing|"
    "watercolour painting|playing the cello|open-water swimming|woodworking|"
    "knitting|photography|gardening|cycling|rowing|pottery|yoga|sailing|"
    "board games|learning Japanese|playing bass guitar|fly fishing|beekeeping"
).split("|")
_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_ALLERGENS = "peanuts|shellfish|penicillin|cats|pollen|latex|gluten|bee stings|dust mites".split("|")
_LANGS = "Portuguese|Spanish|German|French|Italian|Japanese|Korean|Swahili|Polish|Dutch|Greek".split("|")
_DETAILS = (
    "since last spring|for about three years|according to my notes|as of this year|"
    "as far as I know|after the move|since the pandemic|most of the time|"
    "at least twice a month|ever since college|when the weather allows|"
    "on most weekends|since we met|for now"
).split("|")
_PLACES = (
    "the corner cafe|the climbing gym|the farmers market|the river path|the old cinema|"
    "the public pool|the community garden|the night market|the bookshop on Main Street|"
    "the harbour|the ski lodge|the tennis club"
).split("|")


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}" if rng.random() < 0.4 else rng.choice(_FIRST)


def _fact(rng: random.Random) -> tuple[str, list[str]]:
    p, q = _person(rng), _person(rng)
    role, role2 = rng.choice(_ROLES), rng.choice(_ROLES)
    city, city2 = rng.choice(_CITIES), rng.choice(_CITIES)
    emp, job = rng.choice(_EMPLOYERS), rng.choice(_JOBS)
    food, food2 = rng.choice(_FOODS), rng.choice(_FOODS)
    hobby, detail = rng.choice(_HOBBIES), rng.choice(_DETAILS)
    day, month = rng.choice(_DAYS), rng.choice(_MONTHS)
    place, lang = rng.choice(_PLACES), rng.choice(_LANGS)
    n = rng.randint(2, 28)
    templates: list[tuple[str, list[str]]] = [
        (f"{p} is my {role}.", ["family" if role in _ROLES[:16] else "people"]),
        (f"My {role} {p} lives in {city}.", ["family", "places"]),
        (f"My {role} {p} moved to {city} {detail}.", ["family", "places"]),
        (f"{p}'s {role2} is {q}.", ["people"]),
        (f"{p} works at {emp} as a {job}.", ["work", "people"]),
        (f"I work at {emp} as a {job} {detail}.", ["work"]),
        (f"My {role} {p} works as a {job} in {city}.", ["work", "family"]),
        (f"I live in {city} and commute to {emp} by train.", ["places", "work"]),
        (f"I grew up in {city} but moved to {city2} {detail}.", ["places"]),
        (f"I really love {food}, especially on {day} mornings.", ["food", "preferences"]),
        (f"I can't stand {food} and never order it.", ["food", "preferences"]),
        (f"My favourite snack is {food} with {food2}.", ["food", "preferences"]),
        (f"I am allergic to {rng.choice(_ALLERGENS)}; keep it out of any recipe.", ["health"]),
        (f"My {role} {p} is allergic to {rng.choice(_ALLERGENS)}.", ["health", "family"]),
        (f"I go {hobby} at {place} every {day}.", ["hobbies"]),
        (f"{p} taught me {hobby} {detail}.", ["hobbies", "people"]),
        (f"My {role}'s birthday is on {month} {n}.", ["family", "dates"]),
        (f"{p}'s birthday is {month} {n}; a gift card from {place} is a safe bet.", ["dates"]),
        (f"I speak {lang} at home with my {role}.", ["languages", "family"]),
        (f"I am learning {lang} and practise for {n} minutes a day.", ["languages"]),
        (f"The dentist appointment is every {month} with Dr {rng.choice(_LAST)}.", ["health"]),
        (f"I take the {n}:15 train on {day}s to visit my {role} in {city}.", ["routine"]),
        (f"My {role} {p} and I play {rng.choice(['chess', 'tennis', 'padel', 'squash'])} on {day} evenings.", ["hobbies"]),
        (f"I prefer window seats and flights that leave after {n % 12 + 1} am.", ["travel", "preferences"]),
        (f"When travelling to {city}, I stay near {place} if I can.", ["travel"]),
        (f"I would like to visit {city} in {month} next year.", ["travel", "plans"]),
        (f"My {role} {p} has a dog called {rng.choice(_FIRST)}.", ["pets", "family"]),
        (f"I have a cat named {rng.choice(_FIRST)} who hates {food}.", ["pets"]),
        (f"{p} is married to {q} and they live in {city}.", ["people", "family"]),
        (f"My manager {p} prefers updates on {day} before noon.", ["work"]),
        (f"Our team at {emp} ships a release every {n} days.", ["work"]),
        (f"I budget {n * 10} euros a month for {hobby}.", ["money", "hobbies"]),
        (f"I usually drink {food} while reading in the evening.", ["routine", "food"]),
        (f"I stopped eating {food} after a bad experience in {city}.", ["food", "health"]),
        (f"My doctor said I should walk {n} thousand steps a day.", ["health"]),
        (f"I keep my passport in the blue folder in the {rng.choice(['desk', 'closet', 'safe'])}.", ["admin"]),
        (f"I renew my {rng.choice(['car insurance', 'gym membership', 'library card', 'phone plan'])} every {month}.", ["admin"]),
        (f"My {role} {p} studies {rng.choice(['medicine', 'law', 'history', 'physics', 'design'])} in {city}.", ["family", "education"]),
        (f"I met {p} at {place} {detail}.", ["people"]),
        (f"I am saving for a trip to {city} with {p}.", ["travel", "plans", "money"]),
    ]
    return rng.choice(templates)


_REWRITES = (
    (" really love ", " love "),
    (" love ", " really like "),
    (" lives in ", " is living in "),
    (" works at ", " is employed at "),
    ("I work at ", "I'm working at "),
    (" moved to ", " relocated to "),
    (" every ", " each "),
    (" is my ", " is actually my "),
    ("I ", "The user "),
    (".", " (confirmed)."),
)


def _rewrite(rng: random.Random, text: str) -> str:
    options = [r for r in _REWRITES if r[0] in text]
    old, new = rng.choice(options) if options else (".", "!")
    return text.replace(old, new, 1) if old in text else text + " Noted."


def facts(n: int, seed: int = 11) -> list[tuple[str, list[str]]]:
    """``n`` distinct (sentence, tags) pairs; deterministic for a seed."""
    rng = random.Random(seed)
    out: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    while len(out) < n:
        if out and rng.random() < NEAR_DUPLICATE_SHARE:
            base, tags = out[rng.randrange(len(out))]
            text = _rewrite(rng, base)
        else:
            text, tags = _fact(rng)
        key = " ".join(text.lower().split())
        if key in seen:
            continue
        seen.add(key)
        out.append((text, tags))
    return out
