"""Which app a call's writes are recorded under, and how it rides in the call's metadata."""

from __future__ import annotations

from api.mcp.dispatch import CallContext, writer_of
from memory.calls import CallMeta
from memory.writers import STDIO_CLIENT_ID, Writer, writer_from_json
from memory.writes import WINDOW_PREFIX, IdempotencyKey


def test_an_oauth_client_is_one_app_whatever_its_token() -> None:
    ctx = CallContext(user_id=1, client_id="https://app.example/client.json", token_jti="j1")
    assert writer_of(ctx) == Writer("https://app.example/client.json", None)


def test_a_cli_token_is_told_apart_by_its_jti() -> None:
    assert writer_of(CallContext(user_id=1, client_id="ownsona-cli", token_jti="j1")) == Writer(
        "ownsona-cli", "j1"
    )


def test_stdio_names_its_own_client_and_an_anonymous_call_none() -> None:
    assert writer_of(CallContext(user_id=1, entry="stdio")) == Writer(STDIO_CLIENT_ID)
    assert writer_of(CallContext(user_id=1)) is None


def test_the_call_meta_round_trips_and_tolerates_bad_writers() -> None:
    writer = Writer("ownsona-cli", "j1")
    meta = CallMeta(7, writer=writer, request_id="r-1", idempotency_key=IdempotencyKey("k"))
    assert CallMeta.from_json(meta.to_json()) == meta
    assert CallMeta.from_json(CallMeta(7).to_json()) == CallMeta(7)
    assert writer_from_json(None) is None
    assert writer_from_json("ownsona-cli") is None
    assert writer_from_json({"client_id": ""}) is None
    assert writer_from_json({"client_id": "x", "token_jti": 5}) == Writer("x")


def test_a_window_key_gains_a_submission_and_an_operation_key_does_not() -> None:
    window = IdempotencyKey(WINDOW_PREFIX + "abc")
    sent = window.submitted()
    assert sent.key == window.key and sent.submission is not None
    assert sent != window.submitted()  # each submission is its own
    assert IdempotencyKey("explicit-op").submitted() == IdempotencyKey("explicit-op")
