"""argon2id hashing (auth.passwords): pure, no database."""

from __future__ import annotations

import time

from argon2 import PasswordHasher

from auth.passwords import dummy_verify, hash_password, needs_rehash, verify_password


def test_hash_is_argon2id_and_salted():
    first, second = hash_password("correct horse"), hash_password("correct horse")
    assert first.startswith("$argon2id$")
    assert first != second


def test_verify_accepts_the_password_and_nothing_else():
    stored = hash_password("correct horse")
    assert verify_password(stored, "correct horse") is True
    assert verify_password(stored, "correct horsE") is False
    assert verify_password(stored, "") is False


def test_verify_is_false_for_a_malformed_hash():
    assert verify_password("not a hash", "whatever") is False
    assert verify_password("", "whatever") is False


def test_needs_rehash_for_other_parameters_only():
    assert needs_rehash(hash_password("correct horse")) is False
    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("correct horse")
    assert needs_rehash(weak) is True
    assert verify_password(weak, "correct horse") is True
    assert needs_rehash("garbage") is True


def test_dummy_verify_costs_about_a_real_verification():
    stored = hash_password("correct horse")
    dummy_verify("warm-up")
    t0 = time.perf_counter()
    verify_password(stored, "wrong")
    t1 = time.perf_counter()
    dummy_verify("wrong")
    t2 = time.perf_counter()
    print(f"\nverify {1000 * (t1 - t0):.1f} ms, dummy_verify {1000 * (t2 - t1):.1f} ms")
