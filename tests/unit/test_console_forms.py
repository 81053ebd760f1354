"""The console's one reading of an id in a form or query."""

from __future__ import annotations

import pytest

from api.console.forms import positive_id


@pytest.mark.parametrize("raw", ["1", " 42 ", "999999999999999999"])
def test_ids_are_read(raw: str) -> None:
    assert positive_id(raw) == int(raw)


@pytest.mark.parametrize("raw", [None, "", "0", "00", "-3", "+3", "٣", "1e3", "3.0", "1" * 19])
def test_anything_else_is_no_id(raw: str | None) -> None:
    assert positive_id(raw) is None
