"""Credentials stated in plain words: "my wifi password is BlueCanary77".

The key shapes in :mod:`memory.rules.text` catch machine secrets; people state
theirs in prose. A sentence is refused only when it names a credential
(password, passcode, passphrase, PIN, security answer, a door/alarm/gate/safe
code or combination) AND gives a value for it. Talk about credentials ("I
forgot my password yesterday", "my PIN is four digits long", "I use a
password manager") states no value and is stored.

A value is read after a connector ("is", "was", ":", "=", "->", "→", "to") or,
when it looks unmistakably like a secret, right after the noun ("PIN 4821",
but not "a pin 2019 edition": a bare year there names an edition). A word
right after the noun may make it part of another thing ("password manager",
"pin count"). What counts as a value depends on the kind:

- passwords, passcodes, passphrases: a quoted string, or a token with digits,
  symbols or inner capitals ("hunter2", "BlueCanary77", "p@ss"), or a plain
  word that ends the clause and is not a description ("is sunflower.", but
  not "is expired.", "is Bitwarden-generated." or "is on a sticky note");
  never an algorithm's name ("argon2id", "sha256");
- PINs and access codes: three digits or more ("1234", "12-34-56",
  "4821#"), or a token mixing letters and digits; never a word, so "the pin
  on my map is Rome" stays a fact, nor a number naming something ("to 2024
  standards", "144-ball");
- security answers: any content word but a pronoun, since the answer to
  "first pet?" is a plain word by design ("Fluffy"), while "Security answer:
  I always lie" talks about answering.

Several plain lowercase words are a value only after a passphrase or a
"Password:" label ("passphrase: correct horse battery staple"), and never a
sentence ("Password: must be at least 12 characters"). Two statements name
no credential noun of their own and are read as passwords: a login or
credentials statement whose value is a user and a secret ("the router login
is admin / BlueCanary77", "credentials: user rowan, pass Summer2024"), and a
network with a colon and a key-looking token ("wifi: BlueCanary77", not
"wifi: NETGEAR47", which reads as the network's name). The words for
password and PIN in German, Spanish, French, Italian, Portuguese and Dutch
take only secret-looking values, as does any noun after those languages'
verbs ("La mia password è facile" describes it).

Only the first credential nouns of a text are examined (a bound on CPU for
texts that name credentials thousands of times). The caller,
:func:`memory.rules.text.detect_secret`, passes the text with invisible format
characters removed and NFKC-folded.

Standard library only, no I/O. Only the kind is returned, never the value.
"""

from __future__ import annotations

import re

from memory.rules.secret_words import (
    ARY_ADJECTIVES,
    COMPOUND_HEADS,
    DESCRIPTIVE_ENDINGS,
    FUNCTION_WORDS,
    HYPHENATED_DESCRIPTIONS,
    LOGIN_COMPOUND_HEADS,
    NOT_VALUES,
    PHRASE_VERBS,
    PRONOUNS,
)

PASSWORD = "password"
PASSCODE = "passcode"
PASSPHRASE = "passphrase"
PIN = "PIN"
SECURITY_ANSWER = "security answer"
ACCESS_CODE = "access code"

# Kinds whose value may be a plain word; the others need digits.
_WORDY_KINDS = {PASSWORD, PASSCODE, PASSPHRASE, SECURITY_ANSWER}

# Places a code or combination opens. "code" alone is too common ("code
# review", "VS Code", "dress code") to be a credential without one of these.
_LOCKED_THINGS = (
    r"(?:front |back |side |garage |main |building |house |apartment |office )?"
    r"(?:door|doors|alarm|gate|garage|safe|lock|locker|padlock|keypad|lockbox|key ?box|vault"
    r"|building|house|apartment|flat|office|storage unit|shed|bike lock|alarm system)"
)
_OWNER = r"(?:the|my|our|his|her|their|your|mom's|dad's|grandma's|grandpa's)"
_CODE_WORDS = r"(?:codes?|combinations?|combos?)"
_OPENS = r"(?:unlock|unlocks|open|opens|disarm|disarms|get into)"

# (kind, pattern of the credential noun), tried in this order at each position.
_NOUN_PATTERNS: tuple[tuple[str, str], ...] = (
    (SECURITY_ANSWER, r"(?:security|secret)(?: question)? answers?"),
    (SECURITY_ANSWER, rf"answers? (?:to|for|of) {_OWNER} (?:\w+ )?security questions?"),
    (PASSPHRASE, r"pass[ -]?phrases?"),
    (PASSCODE, r"pass[ -]?codes?"),
    (PASSWORD, r"pass[ -]?words?|passwd|pswd|pwd|pw|wi-?fi key|network key|wpa key"),
    (ACCESS_CODE, rf"{_LOCKED_THINGS} (?:codes?|combinations?|combos?|pins?)"),
    (PIN, r"pins?(?: numbers?| codes?)?"),
    (ACCESS_CODE, r"(?:access|entry|security|unlock|recovery|backup|entrance|lock) codes?"),
    (ACCESS_CODE, rf"{_CODE_WORDS} (?:for|to|of|on) {_OWNER} {_LOCKED_THINGS}"),
    (ACCESS_CODE, rf"{_CODE_WORDS} (?:to|for|that) {_OPENS}"),
)
# "Password" and "PIN" in German, Spanish, French, Italian, Portuguese and
# Dutch (Italian says "password" and most say "PIN", matched above). Their
# values are only the secret-looking ones (see _is_value's strong_only): a
# plain word after "ist" or "es" is read as a description, which a reader
# of English rules cannot tell from a password.
_FOREIGN_NOUN_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        PASSWORD,
        r"passw(?:o|ö)rt(?:e?s)?|kennw(?:o|ö)rt(?:e?s)?|contraseñas?|contrasenas?"
        r"|mots? de passe|parola d'ordine|senhas?|palavras?[- ]passe|wachtwoord(?:en)?",
    ),
    (
        PIN,
        r"pin-?codes?|pincodes?|geheimzahl|geheimnummer|code pin|c[oó]digo pin|codice pin"
        r"|número pin|numero pin",
    ),
)
_ALL_NOUN_PATTERNS = _NOUN_PATTERNS + _FOREIGN_NOUN_PATTERNS
# All nouns in one pattern, one group per entry: a text is scanned once, not
# once per kind. Case-insensitive; word-bounded.
_NOUNS = re.compile(
    r"(?<![\w\\-])(?:"
    + "|".join(f"(?P<n{i}>{pattern})" for i, (_, pattern) in enumerate(_ALL_NOUN_PATTERNS))
    + r")(?![\w\\-])",
    re.IGNORECASE,
)
_KIND_OF_GROUP = {f"n{i}": kind for i, (kind, _) in enumerate(_ALL_NOUN_PATTERNS)}
_FOREIGN_GROUPS = frozenset(f"n{i}" for i in range(len(_NOUN_PATTERNS), len(_ALL_NOUN_PATTERNS)))
#: Most credential nouns examined in one text. Each costs a few regex matches
#: on a short window; without a bound a 16,000-character "pw pw pw ..." costs
#: a worker a quarter of a second. A text naming credentials more often than
#: this is a document about them, and its first mentions are still checked.
_MAX_NOUNS_EXAMINED = 50


# Connectors between the noun and its value, each with its own mode: "to"
# ("send my password to Bob") only introduces a value that looks like one.
_CONNECTOR = re.compile(
    r"(?:(?<=\s)|^)(?P<word>is|was|are|were|'s|equals|to|reads|becomes|became"
    r"|ist|lautet|war|es|era|est|était|è|é|luidt)(?=\s)"
    r"|(?P<sign>[:=\u2013\u2014\u2192]|->|=>|(?<=\s)-(?=\s))",
    re.IGNORECASE,
)
_STRONG_ONLY_CONNECTORS = {"to"}
# The other languages' verbs: "La mia password è facile" is a description.
_FOREIGN_CONNECTORS = {"ist", "lautet", "war", "es", "era", "est", "était", "è", "é", "luidt"}

# Where a clause ends: the value must sit in the same clause as the noun.
_CLAUSE_END = re.compile(
    r"[.!?](?=\s|$)|[;,\n()]"
    r"|\s(?:and|but|because|while|although|though|since|when|if|or|so|whereas"
    r"|und|aber|weil|oder|pero|porque|mais|parce|ma|perché|mas|maar|omdat)\s",
    re.IGNORECASE,
)
#: How far past a noun its value is looked for: a value is short, and a bound
#: keeps a 16,000-character text full of "pin" linear.
_WINDOW_CHARS = 200
#: Most words between the noun and the connector ("the password for my gmail account is").
_MAX_GAP_WORDS = 5
#: Most words between the noun and a ":" or "=" ("password for gmail: ..."); more
#: is a heading ("**Password Storage:** LastPass ...") or a label of something else.
_MAX_SIGN_GAP_WORDS = 2
# Unless the gap says whose or which credential it is ("The password to my
# laptop: ..."), a heading or a label does not start with a preposition.
_SIGN_GAP_PREPOSITIONS = frozenset(["to", "for", "of", "on", "at"])
# Words that, between noun and connector, make the connector belong to
# another clause: "passwords that are lengthy" describes passwords in general.
_GAP_BREAKERS = frozenset(["that", "which", "who", "whom", "where", "whose"])
# Markdown and code markup around a token, never part of the value.
_MARKUP = "*_`~#>"

# Words that may stand between a connector and the value.
_FILLERS = re.compile(
    r"^(?:(?:now|still|just|actually|currently|simply|always|literally|basically|probably|"
    r"set to|changed to|the word|the number|the digits|the code|something like|like)\s+)+",
    re.IGNORECASE,
)
# One group per pair of quotes: "...", “...”, '...', ‘...’ and `...`.
_QUOTED = re.compile(
    "^(?:" + "|".join(f"{o}([^{c}\\n]{{1,80}}){c}" for o, c in ('""', "“”", "''", "‘’", "``")) + ")"
)
# Not "144-ball" or "3-digit": a number joined to a word is part of a compound.
_DIGITS = re.compile(r"^[#*]?\d+(?:[ .-]\d+)*[#*]?(?![\w]|-[A-Za-z])")
# A year right after the noun names an edition or a model ("a pin 2019
# edition"); after a connector it is a value ("my PIN is 2019").
_BARE_YEAR = re.compile(r"^(?:19|20)\d\d(?!\w|-|\.\d)")
_TOKEN = re.compile(r"^\S+")
_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*$")
# What a number measures, when it is a length or a count rather than a PIN.
_UNITS = re.compile(
    r"^\s*(?:-\s*)?(?:digits?|characters?|chars?|letters?|numbers?|words?|symbols?|times?"
    r"|days?|weeks?|months?|years?|hours?|minutes?|mins?|seconds?|secs?|attempts?|tries"
    r"|long|old|ago|percent|%"
    # What a number names: "changed the door code to 2024 standards".
    r"|standards?|rules?|regulations?|guidelines?|requirements?|specs?|specifications?"
    # The same in the other languages: "Mein Passwort ist 12 Zeichen lang".
    r"|zeichen|stellen|ziffern|jahre|caracteres|dígitos|digitos|años|caractères|chiffres|ans"
    r"|caratteri|cifre|anni|anos|tekens|cijfers|jaar"
    r"|levels?|editions?|models?|versions?|series|badges?|style|compliance)\b",
    re.IGNORECASE,
)
# Tokens with digits that are not secrets: ordinals, times, sizes, "2FA".
_NOT_A_SECRET_TOKEN = re.compile(
    r"^(?:\d+(?:st|nd|rd|th|am|pm|s|x|k|h|m|min|mins|yo|ish|fa|g|gb|mb|ghz)|v\d+(?:\.\d+)*"
    r"|\d+-(?:digit|character|char|letter|word|symbol|step|factor|year|day|month|week)s?"
    r"|2fa|mfa|wi-?fi|wpa\d?|covid-?19|mp3|mp4|4k|a1|oauth-?2|o?auth2|802\.11\w*"
    r"|argon2(?:id|i|d)?|pbkdf2\w*|sha-?\d+|sha3-?\d+|md5|aes-?\d+|rsa-?\d+|hmac-?sha-?\d+"
    r"|blake2\w*|ed25519|x25519|utf-?8|base64|ipv[46]|http/?2)$",
    re.IGNORECASE,
)
_NUMBERED_COMPOUND = re.compile(r"^\d+(?:-[A-Za-z]+)+$")
_SYMBOLS = set("!@#$%^&*_+=~|<>?/\\")
_TRAILING = ".,;:!?)]}\"'”’"


def detect_prose_secret(text: str) -> str | None:
    """The kind of the first credential the text states a value for, or None."""
    for examined, match in enumerate(_NOUNS.finditer(text)):
        if examined == _MAX_NOUNS_EXAMINED:
            break
        group = match.lastgroup or ""
        kind = _KIND_OF_GROUP[group]
        # Security answers come in lists ("are Fluffy and Maple Street").
        plural = kind != SECURITY_ANSWER and match.group().lower().endswith("s")
        window = text[match.end() : match.end() + _WINDOW_CHARS]
        if _states_value(kind, window, plural=plural, foreign=group in _FOREIGN_GROUPS):
            return kind
    if _states_login_pair(text) or _states_network_key(text):
        return PASSWORD
    return None


def _states_value(kind: str, after: str, *, plural: bool, foreign: bool = False) -> bool:
    """Whether the text right after a credential noun gives its value."""
    end = _CLAUSE_END.search(after)
    clause = after[: end.start()] if end else after
    # The clause may end at a "." or "," inside the value ("1.2.3.4", a quote);
    # the value is read from the full text, the gap only inside the clause.
    words = clause.split()
    if words and words[0].lower().strip(_TRAILING + _MARKUP) in COMPOUND_HEADS:
        return False
    # Right after the noun, past a space: "PIN 4821", "password hunter2";
    # not `password`, whose closing backtick would read as a quote.
    if after[:1].isspace() and _is_value(
        kind, after.lstrip(), strong_only=True, plural=plural, right_after_noun=True
    ):
        return True
    for connector in _CONNECTOR.finditer(clause):
        gap = clause[: connector.start()].split()
        if len(gap) > _MAX_GAP_WORDS or _GAP_BREAKERS.intersection(w.lower() for w in gap):
            break
        sign = connector.group("sign")
        if sign and len(gap) > _MAX_SIGN_GAP_WORDS and gap[0].lower() not in _SIGN_GAP_PREPOSITIONS:
            continue
        word = (connector.group("word") or "").lower()
        rest = after[connector.end() :].lstrip().lstrip(_MARKUP).lstrip()
        strong_only = foreign or word in _STRONG_ONLY_CONNECTORS or word in _FOREIGN_CONNECTORS
        # Several plain words are a value only where a passphrase is named or
        # a password is labelled ("Password: correct horse battery staple"):
        # after "the password is" they are mostly where it is or what it is like.
        phrase = not strong_only and (kind == PASSPHRASE or (kind == PASSWORD and sign == ":"))
        if _is_value(kind, rest, strong_only=strong_only, plural=plural, phrase=phrase):
            return True
        if word not in _STRONG_ONLY_CONNECTORS:
            # The clause's verb gave no value; a later "was" is another
            # clause's ("is the city I was born in"). Only "to" may be a
            # preposition that the real connector follows ("password to my email is").
            break
    return False


def _is_value(
    kind: str,
    rest: str,
    *,
    strong_only: bool,
    plural: bool,
    right_after_noun: bool = False,
    phrase: bool = False,
) -> bool:
    """Whether ``rest`` starts with something that is a credential's value.

    A plain word is read as a value only after a singular noun: "passwords
    are X" talks about passwords in general far more often than it lists one.
    """
    rest = _FILLERS.sub("", rest)
    quoted = _QUOTED.match(rest)
    if quoted:
        inner = next(group for group in quoted.groups() if group is not None).strip()
        if not inner or _is_placeholder(inner):
            return False
        return kind in _WORDY_KINDS or _has_digits(inner, 3)
    if right_after_noun and _BARE_YEAR.match(rest):
        return False
    digits = _DIGITS.match(rest)
    if digits and _has_digits(digits.group(), 3) and not _UNITS.match(rest[digits.end() :]):
        return True
    if phrase and _is_lowercase_phrase(rest):
        return True
    token_match = _TOKEN.match(rest)
    if not token_match:
        return False
    token = token_match.group().strip(_MARKUP).rstrip(_TRAILING + _MARKUP)
    if not token or _NOT_A_SECRET_TOKEN.match(token) or _is_placeholder(token):
        return False
    if right_after_noun and _NUMBERED_COMPOUND.match(token):
        return False  # "PIN 144-ball package": the noun names a part, "144-ball" its kind
    if _mixes_letters_with_digits_or_symbols(token):
        return True
    # Weaker evidence from here on: only after "is"/":"-like connectors, and
    # only for the kinds whose value may be a word.
    if strong_only or kind not in _WORDY_KINDS:
        return False
    if _is_hyphenated_description(token):
        return False
    if _has_inner_capitals(token):
        return True
    if not _WORD.match(token) or plural or _is_description(token):
        return False
    if kind == SECURITY_ANSWER:
        # "Security answer: I always lie on those." talks about answering.
        return token.lower() not in PRONOUNS
    # A plain word is a password only when it ends the clause: "is sunflower."
    # but not "is sunflower yellow now" (a description of something else).
    following = rest[token_match.end() :]
    return (
        not following.strip()
        or token_match.group()[-1] in _TRAILING
        or bool(re.match(r"\s+(?:and|but|so|which|because)\b", following))
    )


def _is_lowercase_phrase(rest: str) -> bool:
    """ "correct horse battery staple": a passphrase of plain lowercase words.

    Three to eight lowercase words filling the clause, none a function word
    (a sentence, "must be at least 12 characters", "on a sticky note", has
    them), none a verb form or an adverb ("changed last week"), and at most
    one description ("correct" is one, "long random words" has three).
    """
    end = _CLAUSE_END.search(rest)
    words = (rest[: end.start()] if end else rest).split()
    if not _MIN_PHRASE_WORDS <= len(words) <= _MAX_PHRASE_WORDS:
        return False
    if not all(_LOWERCASE_WORD.match(word) for word in words):
        return False
    if words[0] in PHRASE_VERBS or any(word in FUNCTION_WORDS for word in words):
        return False
    if any(word.endswith(("ed", "ing", "ly")) for word in words):
        return False
    return sum(_is_description(word) for word in words) <= 1


def _states_login_pair(text: str) -> bool:
    """ "The router login is admin / BlueCanary77", "credentials: user rowan, pass Summer2024"."""
    for examined, match in enumerate(_LOGIN_STATEMENT.finditer(text)):
        if examined == _MAX_NOUNS_EXAMINED:
            break
        gap = match.group("gap").split()
        if gap and gap[0].lower().strip(_TRAILING + _MARKUP) in LOGIN_COMPOUND_HEADS:
            continue
        rest = text[match.end() : match.end() + _WINDOW_CHARS]
        end = _SENTENCE_END.search(rest)
        rest = rest[: end.start()] if end else rest
        pair = _SLASH_PAIR.match(rest) or _PASS_LABEL.search(rest)
        if pair and _looks_generated(pair.group("secret")):
            return True
    return False


def _states_network_key(text: str) -> bool:
    """ "wifi: BlueCanary77": a network, a colon, and what only a key looks like.

    Network names themselves mix letters and digits ("NETGEAR47",
    "HomeNet5G"), so only a token with lowercase letters, two digits or more
    and a capital or a symbol, ending the clause, is read as the key.
    """
    for examined, match in enumerate(_NETWORK_KEY.finditer(text)):
        if examined == _MAX_NOUNS_EXAMINED:
            break
        token = match.group("token").rstrip(_TRAILING + _MARKUP)
        if (
            any(c.islower() for c in token)
            and _has_digits(token, 2)
            and (any(c.isupper() for c in token) or any(c in "!@#$%^&*?~+=" for c in token))
            and not _NOT_A_SECRET_TOKEN.match(token)
            and not _is_placeholder(token)
        ):
            return True
    return False


def _looks_generated(token: str) -> bool:
    """A password's token in a pair: letters mixed with digits or symbols."""
    token = token.strip(_MARKUP).rstrip(_TRAILING + _MARKUP)
    return (
        bool(token)
        and not _NOT_A_SECRET_TOKEN.match(token)
        and not _is_placeholder(token)
        and _mixes_letters_with_digits_or_symbols(token)
    )


def _is_hyphenated_description(token: str) -> bool:
    """ "Bitwarden-generated", "LastPass-managed": how a password is made, not one."""
    head, dash, last = token.rpartition("-")
    if not dash or not head or not last.isalpha():
        return False
    last = last.lower()
    return last in HYPHENATED_DESCRIPTIONS or last.endswith(("ed", "ing"))


def _mixes_letters_with_digits_or_symbols(token: str) -> bool:
    """What generated and chosen secrets look like: "hunter2", "p@ss!word"."""
    letters = sum(c.isalpha() for c in token)
    digits = sum(c.isdigit() for c in token)
    symbols = sum(c in _SYMBOLS for c in token[1:-1])  # inside, not markup at its ends
    if letters and digits:
        return True
    is_address = token.startswith(("http", "www.")) or "/" in token
    return letters >= 2 and bool(symbols) and not is_address


def _has_inner_capitals(token: str) -> bool:
    """ "BlueCanary": a capital after a lowercase letter, except "iPhone", "McKay"."""
    return bool(re.search(r"[a-z][A-Z]", token)) and not re.match(r"^(?:i|e|Mc|Mac)[A-Z]", token)


#: A passphrase of plain words has at least this many ("two words" is talk).
_MIN_PHRASE_WORDS = 3
_MAX_PHRASE_WORDS = 8
_LOWERCASE_WORD = re.compile(r"^[a-z]+$")

# A login or credentials statement whose value is a user and a secret: "The
# router login is admin / BlueCanary77", "credentials: user rowan, pass Summer2024".
_LOGIN_STATEMENT = re.compile(
    r"(?<![\w-])(?:logins?|log-ins?|sign-ins?|credentials?|creds|user ?names?|account details)"
    r"(?![\w-])(?P<gap>(?:\s+[^\s:=]+){0,4}?)\s*(?:(?<=\s)(?:is|are|was|were)(?=\s)|[:=])",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;\n]")
_SLASH_PAIR = re.compile(r"^\s*[^\s/|]+\s*[/|]\s*(?P<secret>\S+)")
_PASS_LABEL = re.compile(
    r"(?<![\w-])(?:pass|passwd|pwd|pw|password)(?![\w-])\s*[:=]?\s*(?P<secret>\S+)", re.IGNORECASE
)
# A network and a colon: "wifi: BlueCanary77". The token is bounded: unbounded, each
# "wifi:" of a long text would scan to its end and back (quadratic: 1 s at 16 kB).
_NETWORK_KEY = re.compile(
    r"(?<![\w-])(?:wi-?fi|wlan|hotspot)(?:\s+(?:network|net))?\s*[:=]\s*(?P<token>[^\s,;()]{1,128})"
    r"\s*(?=$|[,;)\n]|[.!?](?:\s|$))",
    re.IGNORECASE,
)

_PLACEHOLDER_STARTS = ("your", "<", "{", "$", "%", "[", "os.", "env.", "env[", "process.env")


def _is_placeholder(value: str) -> bool:
    """Stand-ins of documentation and code: "your_password", "<password>", "****"."""
    lowered = value.lower()
    if lowered.startswith(_PLACEHOLDER_STARTS) or "example" in lowered:
        return True
    return set(lowered) <= set("*x•.-_ ")


def _has_digits(value: str, least: int) -> bool:
    return sum(c.isdigit() for c in value) >= least


def _is_description(word: str) -> bool:
    lowered = word.lower()
    if lowered in NOT_VALUES:
        return True
    if word[0].isupper() and word[1:].islower():
        return False  # a capitalised word mid-sentence is a name, not a description
    return lowered in ARY_ADJECTIVES or (len(lowered) > 4 and lowered.endswith(DESCRIPTIVE_ENDINGS))
