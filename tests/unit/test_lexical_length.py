"""Recall across sessions (issue 28): the length factor of a text's lexical share."""

from __future__ import annotations

import pytest

from memory.rules.lexical_length import LENGTH_B, LENGTH_REFERENCE, length_factor


def test_a_text_up_to_the_reference_length_keeps_its_share():
    assert length_factor(40) == 1.0
    assert length_factor(LENGTH_REFERENCE) == 1.0


def test_a_longer_text_keeps_less_of_its_share():
    assert LENGTH_B == 1.0
    assert length_factor(2 * LENGTH_REFERENCE) == pytest.approx(0.5)
    assert length_factor(4000) < length_factor(LENGTH_REFERENCE + 100) < 1.0
    assert length_factor(200, reference=100, b=0.75) == pytest.approx(1 / 1.75)
