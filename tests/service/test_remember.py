"""remember: output fields, dedup (exact / near / tombstones), secrets, tags, supersedes,
downweights, keep, expiry (tools chapter "The remember tool"; SUPPLEMENT §2-3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from .helpers import (
    FULL_FIELDS,
    assert_fields,
    call,
    cosine,
    expire,
    fails,
    fingerprint,
    get,
    row_count,
)

BLUE = "My favourite colour is blue."
BLUE_US = "My favorite color is blue."  # MiniLM cosine ~0.967 with BLUE
PEANUTS = "I am allergic to peanuts."
PEANUTS_2 = "I'm allergic to peanuts"  # cosine ~0.973


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


async def test_paraphrase_pairs_are_near_duplicates_for_the_model(deps):
    # The near-duplicate tests below rely on these pairs scoring >= 0.90.
    assert await cosine(deps, BLUE, BLUE_US) >= 0.93
    assert await cosine(deps, PEANUTS, PEANUTS_2) >= 0.93
    assert await cosine(deps, BLUE, "I play tennis on weekends.") < 0.5


async def test_remember_output_and_stored_row(deps, alice):
    before = datetime.now(UTC)
    out = await call(
        deps,
        alice,
        "remember",
        text="  My son Colby lives in Los Angeles.  ",
        tags=["Family"],
        source_provider="openai",
        importance=0.8,
        capture_mode="explicit",
        session_id="conv-42",
    )
    assert out["ok"] is True
    assert isinstance(out["memory_id"], int) and not isinstance(out["memory_id"], bool)
    assert out["memory_id"] >= 1
    assert out["message"] == "Ok"
    assert out["near_duplicates"] == []  # default policy is "ask": the list is present
    assert "previously_corrected" not in out  # no tombstones nearby

    row = await get(deps, alice, out["memory_id"])
    assert_fields(row, FULL_FIELDS)
    assert row["text"] == "My son Colby lives in Los Angeles."  # trimmed
    assert row["tags"] == ["family"]
    assert row["importance"] == pytest.approx(0.8)
    assert row["source_provider"] == "openai"
    assert row["capture_mode"] == "explicit"
    assert row["session_id"] == "conv-42"
    assert row["keep"] is False
    assert (
        row["deleted_at"] is None and row["forget_reason"] is None and row["replaced_by_id"] is None
    )
    assert row["expires_at"] is None
    # last_confirmed_at defaults to now() on insert.
    confirmed = _parse(row["last_confirmed_at"])
    assert before - timedelta(seconds=5) <= confirmed <= datetime.now(UTC) + timedelta(seconds=5)
    assert row["salience"] == 0 and row["use_count"] == 0


async def test_remember_defaults(deps, alice):
    out = await call(deps, alice, "remember", text="I play tennis on weekends.")
    row = await get(deps, alice, out["memory_id"])
    assert row["importance"] == pytest.approx(0.5)
    assert row["tags"] == []
    assert row["source_provider"] is None
    assert row["capture_mode"] is None
    assert row["keep"] is False


async def test_timestamps_in_with_offsets_come_out_in_utc_z(deps, alice):
    out = await call(
        deps,
        alice,
        "remember",
        text="My passport expires in the year 2031.",
        last_confirmed_at="2024-03-01T10:00:00+02:00",
        expires_at="2099-01-01T00:30:00-01:00",
    )
    row = await get(deps, alice, out["memory_id"])
    assert row["last_confirmed_at"] == "2024-03-01T08:00:00Z"
    assert row["expires_at"] == "2099-01-01T01:30:00Z"


@pytest.mark.parametrize("policy", [None, "insert", "skip_if_near", "ask"])
@pytest.mark.parametrize(
    "variant",
    [
        "  my FAVOURITE   colour is\tBLUE.  ",  # case and whitespace
        "ＭＹ favourite colour is blue.",  # NFKC: full-width letters
        "My favourite colour is blue.",  # identical
    ],
)
async def test_exact_duplicate_returns_existing_id_whatever_the_policy(
    deps, alice, policy, variant
):
    first = await call(deps, alice, "remember", text=BLUE, dedup_policy="insert")
    args = {"text": variant}
    if policy:
        args["dedup_policy"] = policy
    again = await call(deps, alice, "remember", **args)
    assert again["memory_id"] == first["memory_id"]
    assert again["message"] == "Already remembered"
    assert await row_count(deps, alice) == 1
    # The stored text is the original one.
    assert (await get(deps, alice, first["memory_id"]))["text"] == BLUE


async def test_exact_duplicate_nfkc_ligature(deps, alice):
    first = await call(deps, alice, "remember", text="The ﬁle server is in the basement.")
    again = await call(deps, alice, "remember", text="the file server is in the basement.")
    assert again["memory_id"] == first["memory_id"] and again["message"] == "Already remembered"
    assert await row_count(deps, alice) == 1


async def test_near_duplicate_ask_inserts_and_lists_them(deps, alice):
    first = await call(deps, alice, "remember", text=BLUE, tags=["prefs"])
    second = await call(deps, alice, "remember", text=BLUE_US, dedup_policy="ask")
    assert second["message"] == "Ok"
    assert second["memory_id"] != first["memory_id"]
    assert await row_count(deps, alice) == 2
    [near] = second["near_duplicates"]
    assert set(near) >= {"id", "text", "score", "tags"}
    assert near["id"] == first["memory_id"]
    assert near["text"] == BLUE
    assert near["tags"] == ["preferences"]
    assert isinstance(near["score"], float)
    assert near["score"] == pytest.approx(await cosine(deps, BLUE, BLUE_US), abs=2e-3)
    assert 0.90 <= near["score"] <= 1.0


async def test_default_policy_is_ask(deps, alice):
    first = await call(deps, alice, "remember", text=BLUE)
    second = await call(deps, alice, "remember", text=BLUE_US)
    assert second["message"] == "Ok" and second["memory_id"] != first["memory_id"]
    assert [n["id"] for n in second["near_duplicates"]] == [first["memory_id"]]


async def test_near_duplicate_skip_if_near_returns_existing(deps, alice):
    first = await call(deps, alice, "remember", text=BLUE)
    before = await fingerprint(deps, alice)
    second = await call(deps, alice, "remember", text=BLUE_US, dedup_policy="skip_if_near")
    assert second["ok"] is True
    assert second["memory_id"] == first["memory_id"]
    assert second["message"] == "Already remembered"
    assert await fingerprint(deps, alice) == before  # nothing stored or changed
    found = await call(deps, alice, "text_search", text="favorite color")
    assert found["memories"] == []


async def test_skip_if_near_reports_the_near_duplicate_it_matched(deps, alice):
    # The chapter shows "near_duplicates": [...] on the "Already remembered" answer of
    # skip_if_near; listing nothing would claim there was no near duplicate at all.
    first = await call(deps, alice, "remember", text=BLUE)
    second = await call(deps, alice, "remember", text=BLUE_US, dedup_policy="skip_if_near")
    assert second["memory_id"] == first["memory_id"]
    near = second.get("near_duplicates")
    assert near, f"skip_if_near matched #{first['memory_id']} but reported near_duplicates={near!r}"
    assert near[0]["id"] == first["memory_id"] and near[0]["score"] >= 0.90
    assert near[0]["text"] == BLUE


async def test_skip_if_near_without_neighbours_inserts(deps, alice):
    await call(deps, alice, "remember", text=BLUE)
    out = await call(
        deps, alice, "remember", text="I play tennis on weekends.", dedup_policy="skip_if_near"
    )
    assert out["message"] == "Ok"
    assert await row_count(deps, alice) == 2


async def test_near_duplicate_insert_policy_skips_the_check(deps, alice):
    await call(deps, alice, "remember", text=BLUE)
    out = await call(deps, alice, "remember", text=BLUE_US, dedup_policy="insert")
    assert out["message"] == "Ok"
    assert not out.get("near_duplicates")
    assert await row_count(deps, alice) == 2


async def test_unrelated_text_has_no_near_duplicates(deps, alice):
    await call(deps, alice, "remember", text=BLUE)
    out = await call(deps, alice, "remember", text="I play tennis on weekends.")
    assert out["near_duplicates"] == []


async def test_near_duplicates_are_capped_at_five_best_first(deps, alice):
    variants = [
        "My favourite colour is blue.",
        "My favorite color is blue.",
        "My favourite colour is blue!",
        "My favourite colour is blue",
        "my favourite color is blue!",
        "My favorite colour is blue.",
        "My favourite color is blue.",
    ]
    for v in variants:
        await call(deps, alice, "remember", text=v, dedup_policy="insert")
    out = await call(deps, alice, "remember", text="My favourite colour is definitely blue.")
    near = out["near_duplicates"]
    assert len(near) == 5  # seven rows qualify
    scores = [n["score"] for n in near]
    assert scores == sorted(scores, reverse=True)
    assert all(s >= 0.90 for s in scores)


async def test_near_duplicate_check_ignores_deleted_and_expired_rows(deps, alice):
    a = await call(deps, alice, "remember", text=BLUE)
    await call(deps, alice, "forget", id=a["memory_id"])
    b = await call(deps, alice, "remember", text=PEANUTS)
    await expire(deps, b["memory_id"])
    blue = await call(deps, alice, "remember", text=BLUE_US, dedup_policy="skip_if_near")
    nuts = await call(deps, alice, "remember", text=PEANUTS_2, dedup_policy="skip_if_near")
    assert blue["message"] == "Ok" and blue["memory_id"] != a["memory_id"]
    assert nuts["message"] == "Ok" and nuts["memory_id"] != b["memory_id"]


# --- tombstones --------------------------------------------------------------------


async def test_tombstone_reported_as_previously_corrected(deps, alice):
    old = await call(deps, alice, "remember", text=PEANUTS)
    newer = await call(
        deps, alice, "remember", text="I am not allergic to anything.", dedup_policy="insert"
    )
    await call(
        deps,
        alice,
        "forget",
        id=old["memory_id"],
        reason="tested negative",
        replaced_by_id=newer["memory_id"],
    )
    tomb = await get(deps, alice, old["memory_id"])

    for policy in ("ask", "skip_if_near", "insert"):
        text = {
            "ask": PEANUTS_2,
            "skip_if_near": "I am allergic to peanuts!",
            "insert": "I'm allergic to peanuts.",
        }[policy]
        out = await call(deps, alice, "remember", text=text, dedup_policy=policy)
        # A signal, never a veto: the memory is stored.
        assert out["message"] == "Ok", policy
        assert out["memory_id"] not in (old["memory_id"], newer["memory_id"])
        [pc] = [p for p in out["previously_corrected"] if p["id"] == old["memory_id"]]
        assert pc["text"] == PEANUTS
        assert isinstance(pc["score"], float) and 0.90 <= pc["score"] <= 1.0
        assert pc["forget_reason"] == "tested negative"
        assert pc["replaced_by_id"] == newer["memory_id"]
        assert pc["deleted_at"] == tomb["deleted_at"]
        await call(deps, alice, "forget", id=out["memory_id"], hard_delete=True)


async def test_same_text_as_tombstone_is_stored_again_and_flagged(deps, alice):
    old = await call(deps, alice, "remember", text=PEANUTS)
    await call(deps, alice, "forget", id=old["memory_id"], reason="wrong")
    again = await call(deps, alice, "remember", text=PEANUTS)
    assert again["message"] == "Ok" and again["memory_id"] != old["memory_id"]
    pc = again["previously_corrected"]
    assert pc[0]["id"] == old["memory_id"] and pc[0]["score"] == pytest.approx(1.0, abs=1e-3)
    assert pc[0]["forget_reason"] == "wrong" and pc[0]["replaced_by_id"] is None


async def test_unrelated_tombstones_are_not_reported(deps, alice):
    old = await call(deps, alice, "remember", text=PEANUTS)
    await call(deps, alice, "forget", id=old["memory_id"])
    out = await call(deps, alice, "remember", text=BLUE)
    assert "previously_corrected" not in out or out["previously_corrected"] == []


# --- secrets -------------------------------------------------------------------------

_SECRETS = {
    "openai": "sk-" + "A1b2C3d4" * 4,
    "openai-proj": "sk-proj-" + "Ab3_" * 8,
    "anthropic": "sk-ant-api03-" + "Zx9-" * 8,
    "github-ghp": "ghp_" + "a1B2c3D4e5" * 4,
    "github-ghs": "ghs_" + "Q1w2E3r4T5" * 4,
    "github-gho": "gho_" + "Z9x8C7v6B5" * 4,
    "github-pat": "github_pat_" + "11ABCDEFG0" * 4,
    "aws-akia": "AKIA" + "IOSFODNN7EXAMPLE",
    "aws-asia": "ASIA" + "Q2W3E4R5T6Y7U8I9",
    "slack": "xoxb-" + "123456789012-abcdefABCDEF",
    "google": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "stripe-sk": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe-rk": "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "pem-rsa": "-----BEGIN RSA "
    + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "pem": "-----BEGIN " + "PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----",
    "pem-openssh": "-----BEGIN OPENSSH "
    + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----",
}


@pytest.mark.parametrize("kind", sorted(_SECRETS))
async def test_secret_shapes_are_rejected_and_nothing_stored(deps, alice, kind):
    secret = _SECRETS[kind]
    err = await fails(
        deps, alice, "remember", "SECRET_REJECTED", text=f"Remember my credential: {secret} thanks"
    )
    assert secret not in err.message
    assert secret not in str(err.detail)
    assert await row_count(deps) == 0


@pytest.mark.parametrize(
    "text",
    [
        "My task-list for today is short.",
        "I use sk-learn and numpy at work.",
        "AKIA is not a key by itself.",
        "The BEGIN of the story is the best part.",
    ],
)
async def test_ordinary_text_is_not_a_secret(deps, alice, text):
    out = await call(deps, alice, "remember", text=text)
    assert out["message"] == "Ok"


# --- tags --------------------------------------------------------------------------------


async def test_tag_normalization(deps, alice):
    out = await call(
        deps,
        alice,
        "remember",
        text="I go sailing on the lake every summer.",
        tags=[
            "Family",
            "  Work Stuff ",
            "snake_case_tag",
            "a",
            "x" * 41,
            "--Hi--there--",
            "fam",
            "FAMILY",
            "y" * 40,
        ],
    )
    tags = (await get(deps, alice, out["memory_id"]))["tags"]
    assert sorted(tags) == sorted(["family", "work-stuff", "snake-case-tag", "hi-there", "y" * 40])
    assert len(tags) == len(set(tags))
    for t in tags:
        assert all(c.isdigit() or c == "-" or "a" <= c <= "z" for c in t)


_SYNONYMS = {
    "family": ["fam", "families", "relatives", "kin"],
    "work": ["job", "career", "employment"],
    "preferences": ["pref", "prefs", "preference", "likes", "dislikes"],
    "health": ["medical", "medicine"],
    "software": ["tech", "technology", "programming", "coding", "dev"],
}


async def test_tag_synonyms_collapse_to_canonical(deps, alice):
    pairs = [(syn, canon) for canon, syns in _SYNONYMS.items() for syn in syns]
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[
            {"text": f"Synonym probe number {i} for tag {syn}.", "tags": [syn.upper()]}
            for i, (syn, _) in enumerate(pairs)
        ],
        dedup_policy="insert",
    )
    for (syn, canon), result in zip(pairs, out["results"], strict=True):
        assert (await get(deps, alice, result["memory_id"]))["tags"] == [canon], syn


async def test_at_most_twenty_tags(deps, alice):
    out = await call(
        deps,
        alice,
        "remember",
        text="A memory with many tags.",
        tags=[f"tag{i}" for i in range(30)],
    )
    tags = (await get(deps, alice, out["memory_id"]))["tags"]
    assert len(tags) == 20
    assert set(tags) <= {f"tag{i}" for i in range(30)}


# --- supersedes and downweights --------------------------------------------------------------


async def test_supersedes_soft_deletes_the_old_row_in_the_same_call(deps, alice):
    old = await call(deps, alice, "remember", text="My son Colby lives in Boston.")
    out = await call(
        deps,
        alice,
        "remember",
        text="My son Colby moved to Los Angeles.",
        supersedes=[old["memory_id"], 999999],
    )
    new_id = out["memory_id"]
    assert out["message"] == "Ok"
    assert out.get("superseded") == [old["memory_id"]]
    assert 999999 in out["skipped"]["supersedes"]
    row = await get(deps, alice, old["memory_id"])
    assert row["deleted_at"] is not None
    assert row["forget_reason"] == f"superseded by #{new_id}"
    assert row["replaced_by_id"] == new_id
    recalled = await call(deps, alice, "recall", query="where does my son Colby live")
    ids = [m["id"] for m in recalled["matches"]]
    assert new_id in ids and old["memory_id"] not in ids


async def test_supersedes_already_deleted_row_is_skipped(deps, alice):
    old = await call(deps, alice, "remember", text="My son Colby lives in Boston.")
    await call(deps, alice, "forget", id=old["memory_id"], reason="typo")
    out = await call(
        deps, alice, "remember", text="My son Colby lives in Denver.", supersedes=[old["memory_id"]]
    )
    assert out["skipped"]["supersedes"] == [old["memory_id"]]
    assert (await get(deps, alice, old["memory_id"]))["forget_reason"] == "typo"


async def test_supersedes_locked_row_is_refused_and_nothing_stored(deps, alice):
    old = await call(deps, alice, "remember", text="My blood type is O negative.", keep=True)
    before = await fingerprint(deps, alice)
    err = await fails(
        deps,
        alice,
        "remember",
        "INVALID_INPUT",
        text="My blood type is A positive.",
        supersedes=[old["memory_id"]],
    )
    assert err.detail and err.detail.get("reason") == "locked"
    assert await fingerprint(deps, alice) == before
    assert (await get(deps, alice, old["memory_id"]))["deleted_at"] is None


async def test_downweights_lowers_salience_and_keeps_the_row_active(deps, alice):
    old = await call(deps, alice, "remember", text="I drink three coffees a day.")
    out = await call(
        deps,
        alice,
        "remember",
        text="I have cut down to one coffee a day.",
        downweights=[old["memory_id"], 424242],
    )
    assert out.get("downweighted") == [old["memory_id"]]
    assert 424242 in out["skipped"]["downweights"]
    row = await get(deps, alice, old["memory_id"])
    assert row["deleted_at"] is None
    assert row["salience"] < 0
    assert row["salience"] == pytest.approx(-0.25, abs=1e-6)  # 0 + 0.5 * -0.5 * (1 + 0)
    recalled = await call(deps, alice, "recall", query="how much coffee do I drink")
    assert old["memory_id"] in [m["id"] for m in recalled["matches"]]


async def test_downweights_twice_steps_further(deps, alice):
    old = await call(deps, alice, "remember", text="I drink three coffees a day.")
    await call(
        deps,
        alice,
        "remember",
        text="I drink two coffees a day now.",
        downweights=[old["memory_id"]],
        dedup_policy="insert",
    )
    await call(
        deps,
        alice,
        "remember",
        text="Coffee: one cup a day these days.",
        downweights=[old["memory_id"]],
        dedup_policy="insert",
    )
    row = await get(deps, alice, old["memory_id"])
    # -0.25 then -0.25 + 0.5*-0.5*(1-0.25) = -0.4375
    assert row["salience"] == pytest.approx(-0.4375, abs=1e-6)
    assert row["deleted_at"] is None


# --- keep and expiry ----------------------------------------------------------------------------


async def test_keep_is_stored_and_reported(deps, alice):
    out = await call(deps, alice, "remember", text="My blood type is O negative.", keep=True)
    assert (await get(deps, alice, out["memory_id"]))["keep"] is True
    listed = await call(deps, alice, "list_memories")
    assert listed["memories"][0]["keep"] is True
    recalled = await call(deps, alice, "recall", query="blood type")
    assert recalled["matches"][0]["keep"] is True


async def test_expired_exact_duplicate_is_stored_anew(deps, alice):
    old = await call(deps, alice, "remember", text=BLUE, expires_at="2099-01-01T00:00:00Z")
    await expire(deps, old["memory_id"])
    again = await call(deps, alice, "remember", text=BLUE)
    assert again["message"] == "Ok"
    assert again["memory_id"] != old["memory_id"]
    recalled = await call(deps, alice, "recall", query="favourite colour")
    assert [m["id"] for m in recalled["matches"]] == [again["memory_id"]]


async def test_expiring_memory_is_visible_until_it_expires(deps, alice):
    soon = datetime.now(UTC) + timedelta(hours=1)
    out = await call(
        deps, alice, "remember", text="The plumber comes on Friday.", expires_at=_iso(soon)
    )
    assert (await call(deps, alice, "recall", query="when does the plumber come"))["matches"][0][
        "id"
    ] == out["memory_id"]
    await expire(deps, out["memory_id"])
    assert (await call(deps, alice, "recall", query="when does the plumber come"))["matches"] == []


# --- limits ---------------------------------------------------------------------------------------


async def test_text_length_limit(deps, alice):
    limit = deps.settings.max_text_chars
    ok = await call(deps, alice, "remember", text=("abcd " * (limit // 5 + 1))[: limit - 1] + "z")
    assert ok["message"] == "Ok"
    assert len((await get(deps, alice, ok["memory_id"]))["text"]) == limit
    before = await row_count(deps)
    await fails(deps, alice, "remember", "INVALID_INPUT", text="y" * (limit + 1))
    assert await row_count(deps) == before
