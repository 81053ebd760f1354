"""The OAuth flow (its tables are reference tables) and the console pages, on Citus.

The plain suite's tests, imported and run again against the coordinator.
"""

from tests.api.test_oauth_flow import (  # noqa: F401
    alice_account,
    bob_account,
    browser,
    oauth_clean,
    oauth_http,
    oauth_options,
    test_full_flow_then_mcp,
    test_refresh_rotates_and_keeps_working,
    test_revoking_a_refresh_token_revokes_its_access_tokens,
    test_session_skips_password_but_new_client_still_asks_consent,
)
