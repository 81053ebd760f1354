"""Every documented error and two users' isolation, on Citus: the plain suite's tests.

Imported, not copied (``tests/service``): pytest runs each again here, where ``dsn`` is
a Citus coordinator, and ``bob`` lives on the other worker than ``alice``
(``tests/citus/conftest.py``), so isolation is checked across nodes.
"""

from tests.service.test_bad_input import (  # noqa: F401
    seeded,
    test_a_bad_remember_batch_item_fails_alone,
    test_a_bad_update_memory_batch_item_fails_alone,
    test_bad_input_is_refused_and_changes_nothing,
    test_error_detail_names_the_field,
    test_unstorable_strings_are_invalid_input,
)
from tests.service.test_isolation import (  # noqa: F401
    test_changes_to_the_other_users_rows_are_not_found,
    test_forget_replaced_by_other_users_id_is_refused_like_a_missing_id,
    test_other_users_id_answers_exactly_like_a_missing_id,
    test_reads_see_only_own_rows,
    test_supersedes_and_downweights_cannot_touch_the_other_user,
    test_tags_and_stats_of_the_other_user_unaffected_by_alice,
    test_writes_do_not_dedup_against_the_other_user,
    two,
)


def test_alice_and_bob_live_on_different_workers(alice: int, bob: int, citus) -> None:  # type: ignore[no-untyped-def]
    assert citus.worker_of(alice) is not citus.worker_of(bob)
