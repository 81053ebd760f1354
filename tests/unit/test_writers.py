"""Which app a call's writes are recorded under, and how it rides in message options."""

from __future__ import annotations

from api.mcp.dispatch import CallContext, writer_of
from memory.writers import (
    STDIO_CLIENT_ID,
    Writer,
    current_writer,
    from_options,
    to_options,
    writing_as,
)


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


def test_the_options_round_trip_and_tolerate_old_or_bad_messages() -> None:
    writer = Writer("ownsona-cli", "j1")
    assert from_options(to_options(writer)) == writer
    assert to_options(None) == {}
    assert from_options({}) is None  # a message queued before the option existed
    assert from_options({"request_id": "r"}) is None
    assert from_options({"writer": "ownsona-cli"}) is None
    assert from_options({"writer": {"client_id": ""}}) is None
    assert from_options({"writer": {"client_id": "x", "token_jti": 5}}) == Writer("x")


def test_writing_as_restores_the_previous_writer() -> None:
    assert current_writer() is None
    with writing_as(Writer("a")):
        with writing_as(None):
            assert current_writer() is None
        assert current_writer() == Writer("a")
    assert current_writer() is None
