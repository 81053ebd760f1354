"""Text and tag normalisation and the secret-shape detector (SUPPLEMENT §2).

Pure functions over plain values: the standard library plus
:mod:`memory.errors`, no I/O. Error messages are written for an LLM to act
on, and never quote the user's text, since that text may hold a secret.
"""

from __future__ import annotations

import re
import unicodedata

from memory.errors import SECRET_REJECTED, MemoryServiceError, invalid
from memory.rules.secret_prose import detect_prose_secret

#: Most tags a memory keeps; extra ones are dropped silently (SUPPLEMENT §2).
MAX_TAGS = 20
#: Shortest tag kept, in characters, after normalisation.
MIN_TAG_CHARS = 2
#: Longest tag kept, in characters, after normalisation.
MAX_TAG_CHARS = 40

#: Normalised tag -> canonical tag. Keys and values are already normalised,
#: and no value is itself a key, so normalising twice changes nothing.
TAG_SYNONYMS: dict[str, str] = {
    # From SUPPLEMENT §2.
    "fam": "family",
    "families": "family",
    "relative": "family",
    "relatives": "family",
    "kin": "family",
    "job": "work",
    "jobs": "work",
    "career": "work",
    "employment": "work",
    "pref": "preferences",
    "prefs": "preferences",
    "preference": "preferences",
    "likes": "preferences",
    "dislikes": "preferences",
    "medical": "health",
    "medicine": "health",
    "tech": "software",
    "technology": "software",
    "programming": "software",
    "coding": "software",
    "dev": "software",
    # Our additions: spelling variants and singular/plural pairs only, where
    # merging cannot change what the user meant.
    "careers": "work",
    "occupation": "work",
    "profession": "work",
    "healthcare": "health",
    "friend": "friends",
    "hobby": "hobbies",
    "pet": "pets",
    "goal": "goals",
    "project": "projects",
    "allergy": "allergies",
    "finances": "finance",
    "financial": "finance",
    "traveling": "travel",
    "travelling": "travel",
    "birthdays": "birthday",
    "bday": "birthday",
}

# Letters that NFKD does not split into a base letter plus marks, but that a
# reader would still spell in ASCII; without this "københavn" became "kbenhavn".
_TAG_TRANSLITERATION = str.maketrans(
    {"ø": "o", "æ": "ae", "œ": "oe", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ı": "i"}
)
_TAG_SEPARATORS = re.compile(r"[\s_]+")
_TAG_DISALLOWED = re.compile(r"[^a-z0-9-]+")
_HYPHEN_RUNS = re.compile(r"-{2,}")

# Secret shapes, most specific first: detect_secret reports the first kind that
# matches, so "sk-ant-…" must be tried before the generic OpenAI "sk-…". Each
# shape needs a realistic length and must start a token (no letter or digit
# just before it), so "task-list", "sk-learn" or "AKIA" alone stay ordinary.
_START = r"(?<![A-Za-z0-9])"
_B64URL = r"[A-Za-z0-9_-]"
_SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("PEM private key", r"-----BEGIN[ A-Z0-9]*PRIVATE KEY[ A-Z]*-----"),
        # JWS compact form: header.payload.signature, the header being base64url
        # JSON (so "eyJ"). The payload may be empty (RFC 7797 detached content);
        # an unsigned or truncated token is not a usable credential.
        ("JSON Web Token", rf"{_START}eyJ{_B64URL}{{10,}}\.{_B64URL}*\.{_B64URL}{{16,}}"),
        ("Anthropic API key", rf"{_START}sk-ant-{_B64URL}{{20,}}"),
        ("OpenAI API key", rf"{_START}sk-proj-{_B64URL}{{20,}}"),
        ("OpenAI API key", rf"{_START}sk-{_B64URL}{{20,}}"),
        ("Stripe live key", rf"{_START}[sr]k_live_[A-Za-z0-9]{{20,}}"),
        ("GitHub token", rf"{_START}github_pat_[A-Za-z0-9_]{{22,}}"),
        ("GitHub token", rf"{_START}gh[opsur]_[A-Za-z0-9]{{30,}}"),
        ("AWS access key id", rf"{_START}(?:AKIA|ASIA)[A-Z0-9]{{16}}(?![A-Za-z0-9])"),
        ("Slack token", rf"{_START}xox[baprs]-[A-Za-z0-9-]{{10,}}"),
        ("Google API key", rf"{_START}AIza{_B64URL}{{35}}(?!{_B64URL})"),
    )
)


def normalize_text(text: str) -> str:
    """The form two texts share when one is an exact duplicate of the other.

    NFKC, then lowercase, then whitespace runs collapsed to one space and
    the ends trimmed (SUPPLEMENT §2). ``str.lower`` rather than ``casefold``,
    as the spec says lowercase: "straße" and "strasse" stay distinct.
    Lowercasing can leave a few sequences (Greek ones with accents) that NFKC
    would compose, so NFKC runs again after it; that keeps the function
    idempotent, which a dedup key must be.
    """
    lowered = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).lower())
    return " ".join(lowered.split())


def reject_unstorable(value: str, *, field: str) -> None:
    """INVALID_INPUT for strings PostgreSQL cannot store as UTF-8 text.

    NUL (U+0000) is refused by ``text``; a lone surrogate (``"\\ud800"``,
    which a JSON body can carry) cannot be encoded as UTF-8 at all.
    """
    if "\x00" in value:
        raise invalid(
            f"The {field} field must not contain NUL (U+0000) characters; remove them.",
            field=field,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(
            f"The {field} field contains an unpaired surrogate code point; send valid Unicode.",
            field=field,
        ) from None


def clean_text(value: object, *, field: str = "text", max_chars: int) -> str:
    """Validate a user-supplied text and return it trimmed.

    Required, a string, 1..``max_chars`` characters after trimming, and no
    NUL (PostgreSQL ``text`` cannot store one). Secret shapes are a separate
    check: call :func:`check_secret` on the result.
    """
    if not isinstance(value, str):
        raise invalid(f"The {field} field must be a string.", field=field)
    reject_unstorable(value, field=field)
    text = value.strip()
    if not text:
        raise invalid(f"The {field} field is required and must not be empty.", field=field)
    if len(text) > max_chars:
        raise invalid(
            f"The {field} field is too long: {len(text)} characters, the limit is"
            f" {max_chars}. Shorten it or split it into several memories.",
            field=field,
            max_chars=max_chars,
            length=len(text),
        )
    return text


def detect_secret(text: str) -> str | None:
    """Name the kind of secret the text seems to contain, or None.

    Key shapes first, then credentials stated in prose ("my wifi password is
    BlueCanary77", see :mod:`memory.rules.secret_prose`). The name ("GitHub token",
    "password", "PIN", ...) is safe to show; the matched value never leaves
    this function.

    Both checks read :func:`_as_read` of the text, so a zero-width space in
    "pass\u200bword" or full-width letters do not hide a secret; what is
    stored is the text as given.
    """
    seen = _as_read(text)
    for kind, pattern in _SECRET_SHAPES:
        if pattern.search(seen):
            return kind
    return detect_prose_secret(seen)


def _as_read(text: str) -> str:
    """The text as a reader sees it: invisible format characters dropped, NFKC.

    Format characters (Unicode category Cf: zero-width space and joiners,
    soft hyphen, BOM, bidi marks) render as nothing, so "pass\u200bword" reads
    "password"; NFKC folds full-width and other compatibility letters
    ("ｐａｓｓｗｏｒｄ") to the ones the detectors look for.
    """
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFKC", visible)


def check_secret(text: str, *, field: str = "text") -> None:
    """Raise ``SECRET_REJECTED`` if the text looks like it holds a secret.

    The message names the kind of secret, never the secret (SUPPLEMENT §2).
    """
    kind = detect_secret(text)
    if kind is not None:
        raise MemoryServiceError(
            SECRET_REJECTED,
            f"The {field} field looks like it contains a secret ({kind}); secrets are"
            " never stored. Remove it and try again.",
            {"field": field, "kind": kind},
        )


def normalize_tags(tags: object, *, field: str = "tags", refuse_secrets: bool = False) -> list[str]:
    """Validate a tag list and return its canonical tags (SUPPLEMENT §2).

    Each tag is normalised (see :func:`_normalize_tag`), then mapped through
    :data:`TAG_SYNONYMS`; tags outside 2..40 characters are dropped, then
    duplicates (first one wins), and only the first :data:`MAX_TAGS` are
    kept. None means no tags. Used for tags written and tag filters alike,
    so the two always agree; the result is stable under a second pass.

    With ``refuse_secrets`` (tags written, not tag filters) a tag holding a
    secret ("password BlueCanary77") is ``SECRET_REJECTED`` like a text: the
    tag is stored, so it must not carry what the text may not. It is read
    as given and with its hyphens and underscores as spaces, before
    normalisation would fold "BlueCanary77" into "bluecanary77".
    """
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise invalid(f"The {field} field must be an array of strings.", field=field)
    result: list[str] = []
    for index, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise invalid(
                f"Every item of the {field} field must be a string; item {index} is not.",
                field=field,
                index=index,
            )
        canonical = _normalize_tag(tag)
        canonical = TAG_SYNONYMS.get(canonical, canonical)
        if MIN_TAG_CHARS <= len(canonical) <= MAX_TAG_CHARS and canonical not in result:
            if refuse_secrets:
                _refuse_secret_tag(tag, canonical, field=field, index=index)
            result.append(canonical)
            if len(result) == MAX_TAGS:
                break
    return result


#: A raw tag longer than this is read for secrets only in its canonical form (at
#: most MAX_TAG_CHARS): what is stored is all that can leak, and the detector's
#: cost grows with the text.
_RAW_TAG_CHECK_CHARS = 256


def _refuse_secret_tag(tag: str, canonical: str, *, field: str, index: int) -> None:
    """SECRET_REJECTED, with the tag's index, if a tag that will be stored holds a secret."""
    readings = [canonical.replace("-", " ")]
    if len(tag) <= _RAW_TAG_CHECK_CHARS:
        readings = [tag, _TAG_SEPARATORS.sub(" ", tag.replace("-", " "))]
    for reading in readings:
        try:
            check_secret(reading, field=field)
        except MemoryServiceError as ex:
            ex.detail = {**(ex.detail or {}), "index": index}
            raise


def _normalize_tag(tag: str) -> str:
    """One tag in ``[a-z0-9-]``, hyphen-separated, before synonyms and length.

    The spec keeps only ``[a-z0-9-]``. Dropping every other character would
    turn "café" into "caf", so accented letters are first reduced to their
    base letter (NFKD, whose combining marks are then dropped, plus a few
    letters NFKD leaves whole, such as "ø"): "Café" -> "cafe". NFKD also folds
    full-width and other compatibility forms to ASCII, and ``casefold``
    spells "ß" as "ss". Whitespace and underscores become hyphens.
    """
    folded = unicodedata.normalize("NFKD", tag).casefold().translate(_TAG_TRANSLITERATION)
    hyphenated = _TAG_SEPARATORS.sub("-", folded)
    kept = _TAG_DISALLOWED.sub("", hyphenated)
    return _HYPHEN_RUNS.sub("-", kept).strip("-")
