"""reinforce, confirm and downweights as feedback; learned ranking changes order, never scores."""

from __future__ import annotations

import numpy as np
import pytest

from memory.rules.ranking import next_salience

from .helpers import call, expire, fails, get, remember_many, sql


async def learned(deps, memory_id: int) -> tuple[float, int, int]:
    rows = await sql(
        deps, "SELECT salience, use_count, context_count FROM memories WHERE id = %s", (memory_id,)
    )
    return float(rows[0][0]), int(rows[0][1]), int(rows[0][2])


async def centroid(deps, memory_id: int) -> np.ndarray | None:
    rows = await sql(deps, "SELECT context_centroid FROM memories WHERE id = %s", (memory_id,))
    return None if rows[0][0] is None else np.asarray(rows[0][0].to_numpy(), dtype=np.float64)


async def recall(deps, user: int, query: str, **args) -> list[dict]:
    return (await call(deps, user, "recall", query=query, **args))["matches"]


# --- reinforce, exactly as specified ------------------------------------------------------


async def test_positive_feedback_steps_salience_and_counts_a_use(deps, alice):
    [a] = await remember_many(deps, alice, ["My sister Ana lives in Porto."])
    out = await call(deps, alice, "reinforce", memory_ids=[a])
    assert out == {
        "ok": True,
        "reinforced": [{"id": a, "salience": 0.5, "use_count": 1, "context_count": 0}],
        "message": "Ok",
    }
    out = await call(deps, alice, "reinforce", memory_ids=[a], delta=0.5)
    assert out["reinforced"] == [{"id": a, "salience": 0.625, "use_count": 2, "context_count": 0}]
    assert await learned(deps, a) == (0.625, 2, 0)


async def test_negative_feedback_steps_down_and_ignores_the_query(deps, alice):
    [a] = await remember_many(deps, alice, ["My sister Ana lives in Porto."])
    out = await call(
        deps, alice, "reinforce", memory_ids=[a], delta=-1, query="where does Ana live"
    )
    assert out["reinforced"] == [{"id": a, "salience": -0.5, "use_count": 0, "context_count": 0}]
    assert await centroid(deps, a) is None
    out = await call(deps, alice, "reinforce", memory_ids=[a], delta=-0.4)
    assert out["reinforced"][0]["salience"] == pytest.approx(next_salience(-0.5, -0.4))


async def test_query_moves_the_context_centroid_to_the_running_mean(deps, alice):
    [a] = await remember_many(deps, alice, ["My sister Ana lives in Porto."])
    q1, q2 = "where does my sister live", "which city is Ana in"
    await call(deps, alice, "reinforce", memory_ids=[a], query=q1)
    v1, v2 = (np.asarray(v, dtype=np.float64) for v in await deps.embedder.embed([q1, q2]))
    assert np.allclose(await centroid(deps, a), v1, atol=1e-5)
    out = await call(deps, alice, "reinforce", memory_ids=[a], query=q2, delta=0.2)
    assert out["reinforced"][0]["context_count"] == 2
    mean = (v1 + v2) / np.linalg.norm(v1 + v2)
    assert np.allclose(await centroid(deps, a), mean, atol=1e-5)
    # A zero step teaches nothing: no use, no context.
    out = await call(deps, alice, "reinforce", memory_ids=[a], query=q1, delta=0)
    assert out["reinforced"][0]["use_count"] == 2 and out["reinforced"][0]["context_count"] == 2


async def test_duplicates_collapse_and_unknown_deleted_expired_foreign_are_skipped(
    deps, alice, bob
):
    a, b, gone, old = await remember_many(
        deps, alice, ["I like tea.", "I like green tea.", "I like coffee.", "I like cocoa."]
    )
    [foreign] = await remember_many(deps, bob, ["Bob likes tea."])
    await call(deps, alice, "forget", id=gone)
    await expire(deps, old)
    out = await call(deps, alice, "reinforce", memory_ids=[b, a, b, 999_999, gone, a, old, foreign])
    assert [r["id"] for r in out["reinforced"]] == [b, a]
    assert out["skipped"] == [999_999, gone, old, foreign]
    assert (await learned(deps, b))[1] == 1, "a duplicate id counts once"
    assert await learned(deps, foreign) == (0.0, 0, 0)
    assert await learned(deps, gone) == (0.0, 0, 0)


async def test_nothing_active_is_still_ok(deps, alice):
    out = await call(deps, alice, "reinforce", memory_ids=[12345])
    assert out["ok"] and out["reinforced"] == [] and out["skipped"] == [12345]


async def test_kept_rows_can_be_reinforced(deps, alice):
    r = await call(
        deps, alice, "remember", text="My passport number is in the blue folder.", keep=True
    )
    out = await call(deps, alice, "reinforce", memory_ids=[r["memory_id"]])
    assert out["reinforced"][0]["salience"] == 0.5


async def test_reinforce_is_not_an_edit(deps, alice):
    [a] = await remember_many(deps, alice, ["My sister Ana lives in Porto."])
    before = await get(deps, alice, a)
    await call(deps, alice, "reinforce", memory_ids=[a], query="where does Ana live")
    after = await get(deps, alice, a)
    for field in ("text", "updated_at", "last_confirmed_at", "tags", "keep", "importance"):
        assert after[field] == before[field]


async def test_a_retried_reinforce_steps_once(deps, alice):
    from tests.tool_calls import USE_CASES

    [a] = await remember_many(deps, alice, ["My sister Ana lives in Porto."])
    first = await USE_CASES["reinforce"](deps, alice, {"memory_ids": [a]}, idempotency_key="r-1")
    again = await USE_CASES["reinforce"](deps, alice, {"memory_ids": [a]}, idempotency_key="r-1")
    assert first == again and (await learned(deps, a))[:2] == (0.5, 1)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({}, "INVALID_INPUT"),
        ({"memory_ids": []}, "INVALID_INPUT"),
        ({"memory_ids": "1"}, "INVALID_INPUT"),
        ({"memory_ids": [1.5]}, "INVALID_INPUT"),
        ({"memory_ids": [True]}, "INVALID_INPUT"),
        ({"memory_ids": [0]}, "INVALID_INPUT"),
        ({"memory_ids": [1], "delta": 1.01}, "INVALID_INPUT"),
        ({"memory_ids": [1], "delta": -2}, "INVALID_INPUT"),
        ({"memory_ids": [1], "delta": "up"}, "INVALID_INPUT"),
        ({"memory_ids": [1], "query": ""}, "INVALID_INPUT"),
        ({"memory_ids": [1], "query": 7}, "INVALID_INPUT"),
        ({"memory_ids": list(range(1, 202))}, "LIMIT_EXCEEDED"),
    ],
)
async def test_bad_input(deps, alice, args, code):
    await fails(deps, alice, "reinforce", code, **args)


async def test_two_hundred_ids_are_fine(deps, alice):
    out = await call(deps, alice, "reinforce", memory_ids=list(range(1, 201)))
    assert len(out["skipped"]) == 200


# --- confirm and downweights are the same update -----------------------------------------


async def test_confirm_is_positive_feedback_of_half_a_step(deps, alice):
    [a] = await remember_many(deps, alice, ["My sister Ana lives in Porto."])
    await call(deps, alice, "confirm", id=a)
    assert await learned(deps, a) == (pytest.approx(0.25), 1, 0)
    await call(deps, alice, "confirm", id=a)
    assert (await learned(deps, a))[0] == pytest.approx(next_salience(0.25, 0.5))


async def test_downweights_take_a_negative_half_step(deps, alice):
    [old] = await remember_many(deps, alice, ["I work at Initech."])
    out = await call(deps, alice, "remember", text="I work at Globex now.", downweights=[old])
    assert out["downweighted"] == [old]
    assert await learned(deps, old) == (pytest.approx(-0.25), 0, 0)
    assert (await get(deps, alice, old))["deleted_at"] is None


# --- learning changes order, not scores ------------------------------------------------------

QUERY = "where do my siblings live"
PETS = ["My brother lives in Porto.", "My sister lives in Porto."]


async def _pets(deps, alice):
    ids = await remember_many(deps, alice, PETS)
    before = await recall(deps, alice, QUERY)
    scores = {m["id"]: m["score"] for m in before}
    assert set(ids) <= set(scores)
    assert abs(scores[ids[0]] - scores[ids[1]]) < 0.04, scores  # about equally similar
    return ids, before, scores


async def test_reinforce_with_the_query_lifts_the_lower_match_without_changing_scores(deps, alice):
    ids, before, scores = await _pets(deps, alice)
    top, lower = before[0]["id"], before[1]["id"]
    await call(deps, alice, "reinforce", memory_ids=[lower], query=QUERY)
    after = await recall(deps, alice, QUERY)
    assert [m["id"] for m in after[:2]] == [lower, top]
    assert {m["id"]: m["score"] for m in after} == scores, "scores stay raw cosine"
    promoted = after[0]
    assert (
        promoted["salience"] == 0.5
        and promoted["use_count"] == 1
        and promoted["context_count"] == 1
    )
    assert "context_count" not in after[1], "context_count only when the row has learned context"
    # min_score still filters on the raw cosine: a cut between the two drops the promoted row.
    cut = (scores[lower] + scores[top]) / 2
    kept = await recall(deps, alice, QUERY, min_score=cut)
    assert [m["id"] for m in kept] == [top]


async def test_negative_reinforce_demotes(deps, alice):
    ids, before, scores = await _pets(deps, alice)
    top, lower = before[0]["id"], before[1]["id"]
    await call(deps, alice, "reinforce", memory_ids=[top], delta=-1)
    after = await recall(deps, alice, QUERY)
    assert [m["id"] for m in after[:2]] == [lower, top]
    assert {m["id"]: m["score"] for m in after} == scores


async def test_nothing_decays_with_time(deps, alice):
    ids, before, scores = await _pets(deps, alice)
    lower = before[1]["id"]
    await call(deps, alice, "reinforce", memory_ids=[lower], query=QUERY)
    state = await learned(deps, lower)
    # Ten years pass for the promoted row and nobody touches it.
    await sql(
        deps,
        "UPDATE memories SET created_at = created_at - interval '10 years',"
        " updated_at = updated_at - interval '10 years' WHERE id = %s",
        (lower,),
    )
    assert await learned(deps, lower) == state
    after = await recall(deps, alice, QUERY)
    assert after[0]["id"] == lower and {m["id"]: m["score"] for m in after} == scores


async def test_build_context_prompt_follows_the_learned_order(deps, alice):
    ids, before, _ = await _pets(deps, alice)
    lower = before[1]["id"]
    await call(deps, alice, "reinforce", memory_ids=[lower], query=QUERY)
    out = await call(deps, alice, "build_context_prompt", user_prompt=QUERY, limit=2)
    assert out["memory_ids"][0] == lower
    search = await call(deps, alice, "search_memory", query=QUERY)
    assert search["matches"][0]["id"] == lower
