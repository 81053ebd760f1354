"""The use cases record the writer on the rows they create, and only there (migration 0014)."""

from __future__ import annotations

from memory.audit import COMMAND_CLIENT_ID
from memory.deps import Deps
from memory.writers import Writer
from scripts.chat_import_commands import direct_store
from tests.service.helpers import opened_rows
from tests.tool_calls import USE_CASES


async def _writers(deps: Deps, user_id: int) -> dict[str, str | None]:
    """Each row's text (opened if sealed) and the app recorded as its writer."""
    rows = await opened_rows(
        deps,
        "SELECT id, user_id, text, tags, text_sealed, tags_sealed, written_by_client"
        " FROM memories WHERE user_id = %s",
        (user_id,),
    )
    return {r["text"]: r["written_by_client"] for r in rows}


async def test_the_chat_import_command_records_itself(
    deps: Deps, alice: int, clean_db: str
) -> None:
    store = direct_store(deps, alice, None, client_id=COMMAND_CLIENT_ID)
    payload = await store([{"text": "My grandmother grew up in Braga."}], "import-1")
    assert payload["ok"], payload
    assert await _writers(deps, alice) == {"My grandmother grew up in Braga.": COMMAND_CLIENT_ID}


async def test_an_edit_a_merge_and_a_batch_keep_or_set_the_writer_as_they_should(
    deps: Deps, alice: int, clean_db: str
) -> None:
    a, b = Writer("app-a"), Writer("app-b")
    first = await USE_CASES["remember"](
        deps, alice, {"text": "My flat is on the third floor."}, writer=a
    )
    merge = await USE_CASES["remember_batch"](
        deps,
        alice,
        {"items": [{"text": "My flat is on the THIRD floor."}, {"text": "My door is red."}]},
        writer=b,
    )
    assert merge["results"][0]["memory_id"] == first["memory_id"]
    edit = await USE_CASES["update_memory"](
        deps,
        alice,
        {"id": first["memory_id"], "text": "My flat is on the fourth floor."},
        writer=b,
    )
    assert edit["ok"], edit
    # Outside any call (an operator script): nothing is recorded.
    await USE_CASES["remember"](deps, alice, {"text": "My postcode starts with EH6."})
    assert await _writers(deps, alice) == {
        "My flat is on the fourth floor.": "app-a",
        "My door is red.": "app-b",
        "My postcode starts with EH6.": None,
    }
