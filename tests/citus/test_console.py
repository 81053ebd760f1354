"""The console pages on Citus: the plain suite's tests, imported and run again."""

from tests.console.conftest import (  # noqa: F401
    browser,
    conductor,
    console_jobs,
    console_runtime,
    console_settings,
    owner,
    owner_mcp,
)
from tests.console.test_memories import (  # noqa: F401
    test_bulk_forget_takes_the_memories_out_of_recall,
    test_the_list_shows_memories_newest_first_and_its_filters_narrow_it,
    test_the_search_box_finds_a_fact_by_meaning_with_its_score,
)
from tests.console.test_stats import (  # noqa: F401
    test_another_users_figures_are_not_counted,
    test_stats_show_the_counts_and_todays_recall_calls,
)
