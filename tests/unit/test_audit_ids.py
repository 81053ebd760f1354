"""Which memories the audit log says a call read or changed."""

from __future__ import annotations

from memory.rules.audit_ids import MAX_IDS, touched


def test_a_write_changes_what_it_stored_and_superseded_not_what_it_only_saw() -> None:
    payload = {
        "ok": True,
        "memory_id": 5,
        "near_duplicates": [{"id": 9, "score": 0.95}],
        "previously_corrected": [{"id": 11, "replaced_by_id": 12}],
        "skipped": [{"id": 13}],
    }
    assert touched({"text": "x", "supersedes": [77]}, payload, read_only=False) == ([], [77, 5])


def test_a_dry_run_or_a_refused_write_changes_nothing() -> None:
    assert touched({"id": 3, "dry_run": True}, {"ok": True, "id": 3}, read_only=False) == ([], [])
    refused = {"ok": False, "error": {"code": "NOT_FOUND"}}
    assert touched({"id": 3}, refused, read_only=False) == ([], [])


def test_a_read_names_what_it_returned_once_each_and_capped() -> None:
    payload = {"ok": True, "matches": [{"id": 2}, {"id": 1}, {"id": 2}], "count": 3}
    assert touched({"query": "q"}, payload, read_only=True) == ([2, 1], [])
    many = {"ok": True, "memories": [{"id": i} for i in range(1, MAX_IDS + 50)]}
    assert len(touched({}, many, read_only=True)[0]) == MAX_IDS
    # Booleans and non-positive numbers are not ids.
    assert touched({}, {"ok": True, "id": True, "ids": [0, -4, 7]}, read_only=True) == ([7], [])
