"""``ownsona user list|disable|enable|delete``, run as the real command on the test database.

What the refusals look like at /mcp is in ``tests/api/test_oauth_accounts.py``;
here: what the commands print, change and refuse.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.auth.oauth_flow import rows
from tests.conftest import make_user
from tests.ops.test_backup import REPO, ownsona


def ownsona_without_terminal(
    dsn: str, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """The command with a pipe for stdin, whatever terminal the tests run in."""
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": dsn},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_disable_enable(clean_db: str) -> None:
    make_user(clean_db, "alice")
    make_user(clean_db, "bob")
    disabled = ownsona(clean_db, "user", "disable", "Alice")
    assert disabled.returncode == 0, disabled.stderr
    assert "disabled" in disabled.stdout
    listing = ownsona(clean_db, "user", "list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["NAME", "CREATED", "DISABLED", "LAST", "SIGN-IN", "MEMORIES"]
    alice = next(line for line in lines if line.startswith("alice "))
    bob = next(line for line in lines if line.startswith("bob "))
    assert " yes " in alice and " no " in bob
    assert alice.split()[-1] == "0" and alice.split()[-2] == "-"  # no memories, never signed in
    assert ownsona(clean_db, "user", "enable", "alice").returncode == 0
    assert rows(clean_db, "SELECT username, disabled FROM users ORDER BY 1") == [
        ("alice", False),
        ("bob", False),
    ]
    unknown = ownsona(clean_db, "user", "disable", "carol")
    assert unknown.returncode == 2 and "no account 'carol'" in unknown.stderr


def test_delete_needs_confirmation_and_says_what_went(clean_db: str) -> None:
    alice = make_user(clean_db, "alice")
    bob = make_user(clean_db, "bob")
    # No terminal and no --yes: refused, nothing changes, even with the name piped in.
    no_tty = ownsona_without_terminal(clean_db, "user", "delete", "alice", stdin="alice\n")
    assert no_tty.returncode == 2 and "--yes" in no_tty.stderr
    assert rows(clean_db, "SELECT count(*) FROM users")[0][0] == 2

    for user_id in (alice, bob):
        rows(
            clean_db,
            "INSERT INTO cli_tokens (jti, user_id, scope, issued_at, expires_at)"
            " VALUES (%s, %s, 'memory:read', now(), now() + interval '1 hour')"
            " RETURNING id",
            f"jti-{user_id}",
            user_id,
        )
    deleted = ownsona(clean_db, "user", "delete", "alice", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == (
        "deleted account 'alice': 0 memories, 0 relations, 0 OAuth grants, 1 CLI tokens"
    )
    assert rows(clean_db, "SELECT username FROM users") == [("bob",)]
    assert rows(clean_db, "SELECT user_id FROM cli_tokens") == [(bob,)]
