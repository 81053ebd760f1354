"""The owner's own account controls in the console: a new password, signing out everywhere.

- :func:`change_own_password` checks the current password behind the sign-in
  throttle (a wrong one counts as a failed sign-in), then sets the new one
  with :func:`auth.accounts.change_password`, which ends every way in the
  account had: browser sign-ins, refresh-token families, access tokens and
  CLI tokens. The caller starts a new session for the browser that asked.
- :func:`end_all_sessions` ends every browser sign-in of the account and
  nothing else: apps keep their tokens (disconnecting them is another page).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from auth.accounts import change_password, check_password
from auth.errors import AccountError
from auth.throttle import LoginGuard
from storage import oauth as oauth_store


@dataclass(frozen=True)
class PasswordChange:
    """The outcome of :func:`change_own_password`: ``changed``, or why not."""

    changed: bool = False
    #: What to tell the owner when refused (never contains either password).
    problem: str | None = None
    #: Whole seconds to wait (the sign-in throttle refused the attempt).
    retry_after_s: int | None = None


async def change_own_password(
    pool: AsyncConnectionPool,
    guard: LoginGuard,
    *,
    user_id: int,
    username: str,
    current: str,
    new: str,
    repeated: str,
    address: str,
) -> PasswordChange:
    """Replace the password of ``username`` (who is ``user_id``) when ``current`` is right.

    The form's own rules are checked first, so a typo in the new password
    costs no sign-in attempt. Success ends every session and token of the
    account, this browser's session included.
    """
    if not current or not new:
        return PasswordChange(problem="Enter your current password and the new one twice.")
    if new != repeated:
        return PasswordChange(problem="The two new passwords are not the same.")
    try:
        check_password(new)
    except AccountError as ex:
        return PasswordChange(problem=ex.message)
    if new == current:
        return PasswordChange(problem="The new password is the same as the current one.")
    outcome = await guard.sign_in(username, current, address)
    if outcome.retry_after_s is not None:
        return PasswordChange(
            problem=f"Too many attempts. Try again in {outcome.retry_after_s} seconds.",
            retry_after_s=outcome.retry_after_s,
        )
    if outcome.user_id is None or outcome.user_id != user_id:
        return PasswordChange(problem="Your current password is not right.")
    try:
        await change_password(pool, username, new)
    except AccountError as ex:
        return PasswordChange(problem=ex.message)
    return PasswordChange(changed=True)


async def end_all_sessions(pool: AsyncConnectionPool, user_id: int) -> int:
    """End every browser sign-in of the account; how many there were. Tokens stay."""
    async with pool.connection() as conn:
        return await oauth_store.delete_user_sessions(conn, user_id)
