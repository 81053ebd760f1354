"""Unit tests for memory.rules.text: normalisation, validation, secret shapes, tags."""

from __future__ import annotations

import base64
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.errors import INVALID_INPUT, SECRET_REJECTED, MemoryServiceError
from memory.rules.text import (
    MAX_TAG_CHARS,
    MAX_TAGS,
    MIN_TAG_CHARS,
    TAG_SYNONYMS,
    check_secret,
    clean_text,
    detect_secret,
    normalize_tags,
    normalize_text,
)

_TAG_SHAPE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def _b64url(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# Fake secrets are assembled at run time, so no literal in this file has a
# real credential's shape for a repository scanner to trip over.
_JWT = ".".join(
    (
        _b64url({"alg": "HS256", "typ": "JWT"}),
        _b64url({"sub": "1234567890", "name": "Ana Silva", "iat": 1747490400}),
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV" + "_adQssw5c",
    )
)

SECRETS = [
    ("OpenAI API key", "sk-" + "T3BlbkFJ" * 6),
    ("OpenAI API key", "sk-proj-" + "Ab3_x-Yz9Q" * 8),
    ("Anthropic API key", "sk-ant-api03-" + "Zx9-Qw8_Er7T" * 8),
    ("GitHub token", "ghp_" + "aB3dE6" * 6),
    ("GitHub token", "ghs_" + "Qr7sT1" * 6),
    ("GitHub token", "gho_" + "mN4pQ2" * 6),
    ("GitHub token", "github_pat_" + "11ABCDEFG0" + "_" + "xYz12" * 12),
    ("AWS access key id", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("AWS access key id", "ASIA" + "Q3EGZ2JVKOWYJX7H"),
    ("Slack token", "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKl" * 2),
    ("Slack token", "xoxp-" + "2468013579-1357924680-" + "9876543210"),
    ("Google API key", "AIza" + "Sy" + "Ab1_-" * 6 + "Cd1"),
    ("Stripe live key", "sk_live_" + "51HxYz" * 4),
    ("Stripe live key", "rk_live_" + "51HxYz" * 4),
    ("JSON Web Token", _JWT),
    ("PEM private key", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA"),
    ("PEM private key", "-----BEGIN " + "PRIVATE KEY-----"),
    ("PEM private key", "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXk"),
    ("PEM private key", "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----"),
]

ORDINARY = [
    "My task-list app is Todoist.",
    "I use sk-learn for machine learning at work.",
    "AKIA is my cat's name.",
    "I keep my certificates in the PEM file format.",
    "My Wi-Fi network is called eyJohnny, after my dog.",
    "A JWT header looks like eyJhbGciOiJIUzI1NiJ9... and that is all I remember.",
    "My desk-lamp is from IKEA.",
    "The risk-assessment-framework-for-the-whole-team meeting is on Mondays.",
    "I skate at the sk-8 park on Sundays.",
    "I sign letters to my sister with xoxo.",
    "My GitHub username is ghost_writer_42.",
    "Aiza is my niece's name and she loves AIzawa from the anime.",
    "My fork lives at github.com/ana/github_pat_tools.",
    "Our AWS account alias is acme-prod and our region is eu-west-1.",
    "I was born on 1990-04-12 in Lisbon.",
    "I am allergic to peanuts and shellfish.",
    "The ssh-keygen command made the private key on my laptop.",
    "My blog post slug is how-i-learned-to-stop-worrying-and-love-the-bomb.",
    "The pod web-7d4b9c8f6-x2k9p restarts every night.",
    "My email is ana.silva@example.com and I prefer it to phone calls.",
    "I prefer dark mode in every editor.",
    "The tokenizer splits words like sk_liveliness into pieces.",
]


# --- normalize_text ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Hello\t\n  WORLD  ", "hello world"),
        ("ＡＢＣ　ｄｅｆ", "abc def"),  # full-width letters and ideographic space
        ("ﬁle", "file"),  # ligature
        ("Straße", "straße"),  # lowercase, not casefold
        ("a\u00a0b", "a b"),  # no-break space
        ("Café", "café"),
        ("", ""),
    ],
)
def test_normalize_text(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


@given(st.text())
def test_normalize_text_is_idempotent_and_tidy(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert once == once.strip()
    assert "  " not in once
    assert not any(ch.isspace() and ch != " " for ch in once)


# --- clean_text -------------------------------------------------------------


def _invalid(excinfo: pytest.ExceptionInfo[MemoryServiceError]) -> MemoryServiceError:
    error = excinfo.value
    assert error.code == INVALID_INPUT
    return error


def test_clean_text_trims() -> None:
    assert clean_text("  I like tea.\n", max_chars=100) == "I like tea."


def test_clean_text_accepts_exactly_max_chars_after_trimming() -> None:
    assert clean_text("  " + "x" * 10 + "  ", max_chars=10) == "x" * 10


@pytest.mark.parametrize("value", [None, 5, ["text"], b"bytes", {"text": "x"}])
def test_clean_text_rejects_non_strings(value: object) -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        clean_text(value, field="new_text", max_chars=100)
    error = _invalid(excinfo)
    assert "new_text" in error.message
    assert error.detail == {"field": "new_text"}


@pytest.mark.parametrize("value", ["", "   ", "\n\t "])
def test_clean_text_rejects_empty(value: str) -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        clean_text(value, max_chars=100)
    assert _invalid(excinfo).message == "The text field is required and must not be empty."


def test_clean_text_too_long_gives_limit_and_length_but_not_the_text() -> None:
    text = "PRIVATE-DETAIL " * 10
    with pytest.raises(MemoryServiceError) as excinfo:
        clean_text(text, max_chars=50)
    error = _invalid(excinfo)
    assert "50" in error.message
    assert str(len(text.strip())) in error.message
    assert "PRIVATE-DETAIL" not in error.message
    assert error.detail == {"field": "text", "max_chars": 50, "length": len(text.strip())}


def test_clean_text_rejects_nul() -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        clean_text("my secret\x00diary", max_chars=100)
    error = _invalid(excinfo)
    assert "NUL" in error.message
    assert "diary" not in error.message


# --- secrets ----------------------------------------------------------------


@pytest.mark.parametrize(("kind", "secret"), SECRETS)
@pytest.mark.parametrize(
    "template",
    ["{}", "My key is {}, please remember it.", "API_KEY={}", 'config: "{}"', "({})"],
)
def test_detect_secret_finds_each_kind(kind: str, secret: str, template: str) -> None:
    assert detect_secret(template.format(secret)) == kind


@pytest.mark.parametrize("text", ORDINARY)
def test_detect_secret_ignores_ordinary_facts(text: str) -> None:
    assert detect_secret(text) is None


def test_more_specific_kind_wins() -> None:
    anthropic = "sk-ant-api03-" + "Zx9Qw8Er7T" * 8
    assert detect_secret(anthropic) == "Anthropic API key"


@pytest.mark.parametrize(
    "text",
    [
        "sk-" + "a" * 19,  # one short of a realistic OpenAI key
        "AKIA" + "IOSFODNN7EXAMPL",  # 15 characters after the prefix
        "AKIA" + "IOSFODNN7EXAMPLEX",  # 17: not an access key id either
        "AIza" + "b" * 34,
        "ghp_" + "a1" * 10,
        "xoxb-12345",
    ],
)
def test_detect_secret_needs_realistic_lengths(text: str) -> None:
    assert detect_secret(text) is None


@pytest.mark.parametrize(("kind", "secret"), SECRETS)
def test_check_secret_names_the_kind_never_the_secret(kind: str, secret: str) -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        check_secret(f"remember this: {secret}", field="new_text")
    error = excinfo.value
    assert error.code == SECRET_REJECTED
    assert kind in error.message
    assert "new_text" in error.message
    assert error.detail == {"field": "new_text", "kind": kind}
    payload = json.dumps(error.to_payload())
    # Even the first line of the secret must not leak.
    assert secret.splitlines()[0] not in payload


def test_check_secret_passes_ordinary_text() -> None:
    for text in ORDINARY:
        check_secret(text)


# --- normalize_tags ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (None, []),
        ([], []),
        (["Family"], ["family"]),
        (["fam", "Relatives", "kin", "relative"], ["family"]),
        (["Job", "work", "career", "employment"], ["work"]),
        (["Pref", "likes", "DISLIKES"], ["preferences"]),
        (["Medical ", "medicine"], ["health"]),
        (["tech", "Programming", "coding", "DEV"], ["software"]),
        (["  Work Life  "], ["work-life"]),
        (["snake_case_tag"], ["snake-case-tag"]),
        (["--a--b--"], ["a-b"]),
        (["rock & roll"], ["rock-roll"]),
        (["node.js", "c++"], ["nodejs"]),  # "c" is too short
        (["x", "ok"], ["ok"]),
        (["a" * MAX_TAG_CHARS, "b" * (MAX_TAG_CHARS + 1)], ["a" * MAX_TAG_CHARS]),
        (["Café"], ["cafe"]),
        (["Straße"], ["strasse"]),
        (["København"], ["kobenhavn"]),
        (["ＴＥＣＨ"], ["software"]),  # full-width letters
        (["🙂", "日本"], []),
        (["b-tag", "a-tag", "B_Tag"], ["b-tag", "a-tag"]),
        (["Job", "family", "work"], ["work", "family"]),
    ],
)
def test_normalize_tags(tags: object, expected: list[str]) -> None:
    assert normalize_tags(tags) == expected


def test_normalize_tags_keeps_the_first_twenty_distinct() -> None:
    tags = ["tag-0", "tag-0", "x"] + [f"tag-{n}" for n in range(30)]
    assert normalize_tags(tags) == [f"tag-{n}" for n in range(MAX_TAGS)]


@pytest.mark.parametrize("tags", ["family", ("family",), {"family": 1}, 3])
def test_normalize_tags_rejects_non_lists(tags: object) -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        normalize_tags(tags, field="filter_tags")
    error = _invalid(excinfo)
    assert "filter_tags" in error.message
    assert error.detail == {"field": "filter_tags"}


def test_normalize_tags_rejects_non_string_items_by_index() -> None:
    with pytest.raises(MemoryServiceError) as excinfo:
        normalize_tags(["family", None])
    error = _invalid(excinfo)
    assert "item 1" in error.message
    assert error.detail == {"field": "tags", "index": 1}


@pytest.mark.parametrize(("synonym", "canonical"), sorted(TAG_SYNONYMS.items()))
def test_synonym_table_is_normalised_and_closed(synonym: str, canonical: str) -> None:
    assert normalize_tags([synonym.upper()]) == [canonical]
    assert canonical not in TAG_SYNONYMS
    assert normalize_tags([canonical]) == [canonical]


@given(st.lists(st.text(), max_size=40))
def test_normalize_tags_output_shape_and_idempotence(tags: list[str]) -> None:
    result = normalize_tags(tags)
    assert len(result) <= MAX_TAGS
    assert len(set(result)) == len(result)
    for tag in result:
        assert _TAG_SHAPE.fullmatch(tag)
        assert MIN_TAG_CHARS <= len(tag) <= MAX_TAG_CHARS
    assert normalize_tags(result) == result


@given(st.lists(st.from_regex(r"[A-Za-z0-9 _-]{0,45}", fullmatch=True), max_size=40))
def test_normalize_tags_on_ascii_like_input(tags: list[str]) -> None:
    result = normalize_tags(tags)
    assert all(_TAG_SHAPE.fullmatch(tag) for tag in result)
    assert normalize_tags(result) == result
