from tests.tool_calls import USE_CASES


async def call(deps, user, tool, **args):
    return await USE_CASES[tool](deps, user, args)


async def test_remember_and_recall(deps, alice):
    r = await call(deps, alice, "remember", text="My son Colby lives in Los Angeles.", tags=["fam"])
    assert r["ok"] and r["message"] == "Ok" and r["near_duplicates"] == []
    r2 = await call(deps, alice, "remember", text="I am allergic to peanuts.")
    got = await call(deps, alice, "recall", query="where does my son live")
    assert got["matches"][0]["id"] == r["memory_id"]
    assert got["matches"][0]["tags"] == ["family"]
    dup = await call(deps, alice, "remember", text="my son colby lives in  los angeles.")
    assert dup["memory_id"] == r["memory_id"] and dup["message"] == "Already remembered"
    f = await call(deps, alice, "forget", id=r2["memory_id"], reason="wrong")
    assert f["message"] == "Forgotten"
    again = await call(deps, alice, "remember", text="I'm allergic to peanuts")
    assert again["previously_corrected"][0]["id"] == r2["memory_id"]
