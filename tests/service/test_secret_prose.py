"""Credentials stated in prose are refused on every write path (issue 12).

remember, remember_batch items, update_memory and update_memory_batch
items all refuse "My home wifi password is BlueCanary77" with
SECRET_REJECTED, change nothing, and never echo the value; talk about a
password ("I forgot my password yesterday") is stored as usual. A tag is
stored too, so a secret in a tag is refused the same way (issue 13), and
hidden characters do not hide one.
"""

from __future__ import annotations

from .helpers import call, fails, fingerprint, get, row_count

STATED = "My home wifi password is BlueCanary77"
VALUE = "BlueCanary77"
TALK = "I forgot my password yesterday"
OLD = "My son Colby lives in Boston."


async def _mem(deps, user, text):
    return (await call(deps, user, "remember", text=text, dedup_policy="insert"))["memory_id"]


async def test_remember_refuses_a_stated_password(deps, alice):
    err = await fails(deps, alice, "remember", "SECRET_REJECTED", text=STATED)
    assert err.detail == {"field": "text", "kind": "password"}
    assert VALUE not in err.message
    assert await row_count(deps) == 0
    assert (await call(deps, alice, "remember", text=TALK))["message"] == "Ok"


async def test_remember_batch_refuses_the_item_and_stores_the_others(deps, alice):
    out = await call(deps, alice, "remember_batch", items=[{"text": TALK}, {"text": STATED}])
    first, second = out["results"]
    assert first["ok"] is True and (await get(deps, alice, first["memory_id"]))["text"] == TALK
    assert second["ok"] is False and second["error"]["code"] == "SECRET_REJECTED"
    assert VALUE not in str(second)
    assert out["summary"] == {"total": 2, "succeeded": 1, "failed": 1}
    assert await row_count(deps, alice) == 1


async def test_update_memory_refuses_a_stated_password_and_changes_nothing(deps, alice):
    mid = await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    err = await fails(deps, alice, "update_memory", "SECRET_REJECTED", id=mid, text=STATED)
    assert VALUE not in err.message and VALUE not in str(err.detail)
    assert await fingerprint(deps, alice) == before
    # Talk about a password is an ordinary update.
    changed = await call(deps, alice, "update_memory", id=mid, text="I reset my password")
    assert changed["changed_fields"] == ["text"]


async def test_update_memory_batch_refuses_the_item_and_changes_nothing(deps, alice):
    mid = await _mem(deps, alice, OLD)
    other = await _mem(deps, alice, "I have a cat named Tom.")
    before = await get(deps, alice, mid)
    out = await call(
        deps,
        alice,
        "update_memory_batch",
        items=[{"id": mid, "text": STATED}, {"id": other, "text": "my PIN is four digits long"}],
    )
    refused, updated = out["results"]
    assert refused["ok"] is False and refused["error"]["code"] == "SECRET_REJECTED"
    assert VALUE not in str(out)
    assert updated["ok"] is True
    assert await get(deps, alice, mid) == before
    assert (await get(deps, alice, other))["text"] == "my PIN is four digits long"


SECRET_TAG = "password BlueCanary77"  # stored as "password-bluecanary77" before issue 13


async def test_remember_refuses_a_secret_in_a_tag_and_stores_nothing(deps, alice):
    err = await fails(
        deps, alice, "remember", "SECRET_REJECTED", text=OLD, tags=["family", SECRET_TAG]
    )
    assert err.detail == {"field": "tags", "kind": "password", "index": 1}
    assert VALUE not in err.message and VALUE.lower() not in err.message
    assert await row_count(deps) == 0


async def test_remember_batch_refuses_the_item_with_a_secret_tag_alone(deps, alice):
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[
            {"text": OLD, "tags": ["wifi-password-BlueCanary77"]},
            {"text": TALK, "tags": ["it"]},
        ],
    )
    refused, stored = out["results"]
    assert refused["ok"] is False and refused["error"]["code"] == "SECRET_REJECTED"
    assert refused["error"]["detail"] == {"field": "tags", "kind": "password", "index": 0}
    assert VALUE not in str(out) and VALUE.lower() not in str(out)
    assert stored["ok"] is True
    assert await row_count(deps, alice) == 1


async def test_update_memory_refuses_a_secret_tag_and_changes_nothing(deps, alice):
    mid = await _mem(deps, alice, OLD)
    before = await fingerprint(deps, alice)
    err = await fails(deps, alice, "update_memory", "SECRET_REJECTED", id=mid, tags=[SECRET_TAG])
    assert err.detail == {"field": "tags", "kind": "password", "index": 0}
    assert await fingerprint(deps, alice) == before
    # A tag that talks about passwords is an ordinary tag, and a tag filter
    # holding a secret is no write: recall answers it (call fails on an error).
    changed = await call(deps, alice, "update_memory", id=mid, tags=["password-manager"])
    assert changed["changed_fields"] == ["tags"]
    await call(deps, alice, "recall", query="Colby", tags=[SECRET_TAG])


async def test_hidden_characters_do_not_hide_a_password_and_text_is_stored_as_given(deps, alice):
    await fails(deps, alice, "remember", "SECRET_REJECTED", text="pass\u200bword is BlueCanary77")
    assert await row_count(deps) == 0
    hidden = "I forgot my pass\u200bword yesterday"
    mid = (await call(deps, alice, "remember", text=hidden))["memory_id"]
    assert (await get(deps, alice, mid))["text"] == hidden
