"""Synthetic personal facts and questions for benchmarks, deterministic for a seed.

Varied enough that nearest neighbours look like a real personal store
(people, places, jobs, habits, numbers), not a cloud of random vectors.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

_NAMES = [
    "Ana",
    "Colby",
    "Dana",
    "Lee",
    "Priya",
    "Omar",
    "Mei",
    "Jonas",
    "Sofia",
    "Mateo",
    "Aisha",
    "Liam",
    "Yuki",
    "Noah",
    "Elena",
    "Kofi",
    "Sven",
    "Hana",
    "Diego",
    "Fatima",
    "Arjun",
    "Clara",
    "Tomas",
    "Ingrid",
    "Rafael",
    "Zoe",
    "Ibrahim",
    "Nora",
    "Felix",
    "Leila",
    "Marco",
    "Ava",
]
_RELATIONS = [
    "sister",
    "brother",
    "mother",
    "father",
    "son",
    "daughter",
    "wife",
    "husband",
    "partner",
    "cousin",
    "aunt",
    "uncle",
    "grandmother",
    "grandfather",
    "manager",
    "colleague",
    "neighbour",
    "friend",
    "mentor",
    "dentist",
    "doctor",
    "landlord",
]
_CITIES = [
    "Lisbon",
    "Porto",
    "Berlin",
    "Munich",
    "Osaka",
    "Toronto",
    "Denver",
    "Austin",
    "Nairobi",
    "Lagos",
    "Lima",
    "Quito",
    "Oslo",
    "Bergen",
    "Seoul",
    "Busan",
    "Lyon",
    "Nantes",
    "Perth",
    "Hobart",
    "Dublin",
    "Cork",
    "Vienna",
    "Graz",
    "Prague",
    "Krakow",
]
_JOBS = [
    "nurse",
    "architect",
    "carpenter",
    "teacher",
    "pilot",
    "chef",
    "lawyer",
    "engineer",
    "farmer",
    "journalist",
    "pharmacist",
    "translator",
    "electrician",
    "designer",
    "librarian",
    "veterinarian",
    "accountant",
]
_FOODS = [
    "green tea",
    "black coffee",
    "oat porridge",
    "miso soup",
    "sourdough toast",
    "mango smoothie",
    "lentil curry",
    "ramen",
    "falafel wraps",
    "pad thai",
    "tomato risotto",
    "shakshuka",
    "dumplings",
]
_HOBBIES = [
    "bouldering",
    "sailing",
    "watercolour painting",
    "chess",
    "trail running",
    "pottery",
    "birdwatching",
    "baking bread",
    "playing the cello",
    "woodworking",
    "salsa dancing",
    "astronomy",
    "knitting",
]
#: Shared with scan_corpus.py.
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

_TEMPLATES = (
    "My {rel} {name} lives in {city} and works as a {job}.",
    "I usually have {food} for breakfast on {day}s.",
    "{name}'s birthday is on the {n}th of {month}.",
    "I have been {hobby} every {day} since {year}.",
    "My {rel} {name} is allergic to {food2}.",
    "I moved to {city} in {year} for a job as a {job}.",
    "The wifi router at my {rel}'s flat is in the {room}.",
    "I prefer {food} over {food2} when I eat out with {name}.",
    "{name} recommended a {job} in {city} called {name2}.",
    "My gym membership number ends in {n4}; the gym is near {city} station.",
    "I promised {name} I would help with {hobby} next {day}.",
    "My {rel} {name} has {n} kids and a dog named {name2}.",
)
_ROOMS = ["hallway", "kitchen", "study", "attic", "basement", "living", "room"]

_QUESTIONS = (
    "where does my {rel} live",
    "what do I eat for breakfast",
    "when is {name}'s birthday",
    "what hobbies do I have",
    "what is my {rel} allergic to",
    "why did I move to {city}",
    "what does {name} do for work",
    "which gym do I go to",
    "what did I promise {name}",
    "how many kids does my {rel} have",
    "what food do I prefer",
    "who recommended someone in {city}",
)


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        rel=rng.choice(_RELATIONS),
        name=rng.choice(_NAMES),
        name2=rng.choice(_NAMES),
        city=rng.choice(_CITIES),
        job=rng.choice(_JOBS),
        food=rng.choice(_FOODS),
        food2=rng.choice(_FOODS),
        day=rng.choice(DAYS),
        hobby=rng.choice(_HOBBIES),
        n=rng.randint(2, 28),
        n4=rng.randint(1000, 9999),
        month=rng.choice(MONTHS),
        year=rng.randint(1995, 2025),
        room=rng.choice(_ROOMS),
    )


def facts(count: int, *, seed: int = 7) -> Iterator[str]:
    """``count`` distinct facts (a serial number keeps them distinct at any count)."""
    rng = random.Random(seed)
    for i in range(count):
        yield f"{_fill(rng.choice(_TEMPLATES), rng)} (note {i})"


def questions(count: int, *, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [_fill(rng.choice(_QUESTIONS), rng) for _ in range(count)]
