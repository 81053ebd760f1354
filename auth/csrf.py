"""CSRF protection for the login and consent forms: the double-submit cookie.

The browser gets a random token in an ``HttpOnly``, ``SameSite=Lax``
cookie (``__Host-`` prefixed under https), and every form carries the same
token in a hidden field. A cross-site page can make the browser send the
cookie but can neither read it nor guess it, so it cannot fill the field.
Comparison is constant-time. :func:`auth.authorize_flow.decide` also refuses
a POST whose ``Origin`` header names another site.
"""

from __future__ import annotations

import hmac

from auth.opaque import new_secret, presentable

#: The hidden form field that carries the token.
FIELD = "csrf_token"


def new_token() -> str:
    return new_secret()


def token_matches(cookie_value: str | None, form_value: str | None) -> bool:
    if not presentable(cookie_value) or not presentable(form_value):
        return False
    return hmac.compare_digest(cookie_value.encode(), form_value.encode())
