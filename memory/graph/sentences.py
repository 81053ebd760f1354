"""Sentence rules: normalising text, splitting it into statements and clauses.

Also the word lists that tell a name from a capitalised word and an asserted
statement from a negated, hedged, conditional or question one: a graph edge
is asserted as true.
"""

from __future__ import annotations

import re

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
NAME_RE = (
    rf"{_NAME_WORD}(?:\s+(?:(?:van|von|de|da|del|der|di|du|la|le|bin|al|of|the)\s+)?{_NAME_WORD})*"
)
#: Capitalised words that do not start a name.
NOT_NAMES = frozenset(
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
#: Words a statement may open with that carry no fact ("Remember that ...").
LEAD_INS = re.compile(
    r"^(?:(?:please\s+)?remember\s+that|note\s+that|fyi|just\s+so\s+you\s+know|for\s+the\s+record|"
    r"also|by\s+the\s+way|btw|fun\s+fact|and|so|well|oh|anyway|actually)\b[,:]?\s*",
    re.I,
)
#: Openings of questions, conditions and requests: such a clause yields nothing.
SKIP_START = re.compile(
    r"^(?:if|unless|whether|maybe|perhaps|should|would|could|can|do|does|did|is|are|was|were|"
    r"where|who|what|when|why|how|which|ask|tell|call|remind|let|don't|never|please|imagine|suppose)\b",
    re.I,
)
#: A negated clause yields nothing.
NEGATED = re.compile(
    r"\b(?:not|never|no longer|nobody|no one|none|neither|nor|hardly|anymore)\b", re.I
)
#: A hedged, future or reported clause yields nothing.
HEDGED = re.compile(
    r"\b(?:might|may|could|would|should|will|shall|must|maybe|perhaps|probably|possibly|if|unless|"
    r"wish|hope|hopes|hoping|want to|wants to|going to|plan to|plans to|planning to|used to|"
    r"think|thinks|guess|believe|seems|apparently|rumou?red|supposedly|allegedly)\b"
)
#: Where a sentence splits into clauses that each have their own subject.
CLAUSE_SPLIT = re.compile(
    r"\s*;\s*|,?\s+(?:and|but|while|whereas)\s+(?=(?:I|we|he|she|my|our|his|her)\b|"
    rf"{NAME_RE}(?:'s\s+[a-z-]+)?\s+(?:is|was|lives|works|has|manages|loves|likes|plays|speaks|studies|"
    r"teaches|owns|drives|reports|prefers|hates|enjoys)\b)"
)


def _expand(text: str) -> str:
    """Straight quotes and contractions expanded; whitespace untouched."""
    text = (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u201c", '"')
        .replace("\u201d", '"')
    )
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    return text


def normalise_text(text: str) -> str:
    """Straight quotes, contractions expanded, whitespace collapsed."""
    return " ".join(_expand(text).split())


def _protect(text: str) -> str:
    text = _ABBREV_RE.sub(lambda m: m.group(1) + _DOT, text)
    return _INITIALISM_RE.sub(lambda m: m.group(1).replace(".", _DOT), text)


def restore(text: str) -> str:
    """Put back the abbreviation periods :func:`sentences` protected."""
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
    # The whole text at once, then each line's whitespace: no contraction spans a
    # line break, and per-line regex calls made a 16,000-character text cost 2x more.
    return "\n".join(" ".join(line.split()) for line in _expand(text).splitlines())
