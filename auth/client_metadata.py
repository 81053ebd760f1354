"""Client metadata (RFC 7591 §2): what registration and metadata documents both accept.

Registration (``auth.clients``) and metadata documents (``auth.client_documents``)
validate a client's metadata by the same rules, so those rules live here, where
both can import them. Decisions (what real MCP clients send is accepted):

- ``redirect_uris`` is required; each must pass :func:`auth.redirects.redirect_uri_problem`.
- ``token_endpoint_auth_method`` defaults to ``none`` (a public client that
  proves itself with PKCE), not RFC 7591's ``client_secret_basic``: MCP
  clients (Claude, ChatGPT, Claude Code, the Inspector, the SDKs) are
  native or browser apps that cannot keep a secret and mostly omit the
  field. ``client_secret_basic`` and ``client_secret_post`` get a secret,
  returned once in the 201 answer and stored only as a digest; it does not expire.
- ``grant_types`` defaults to ``authorization_code`` + ``refresh_token``;
  ``authorization_code`` is required and nothing else is supported.
  ``response_types`` defaults to and must be ``["code"]``.
- ``scope``: scopes we do not know are dropped (RFC 7591 §2 lets the
  server replace values); nothing left, or no scope at all, registers every
  scope we support. What a token finally carries is decided at consent.
- ``client_name``, ``application_type`` (``web``/``native``), ``client_uri``,
  ``logo_uri``, ``tos_uri``, ``policy_uri``, ``contacts``, ``software_id``,
  ``software_version`` are kept and echoed; other members are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from auth.oauth_errors import OAuthError
from auth.redirects import redirect_uri_problem
from auth.scopes import DEFAULT_SCOPE, canonical, parse_scope
from storage.oauth import NewClient

AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
GRANT_TYPES = ("authorization_code", "refresh_token")
DEFAULT_AUTH_METHOD = "none"
MAX_REDIRECT_URIS = 20
MAX_NAME_CHARS = 200
_ECHOED_STRINGS = (
    "client_uri",
    "logo_uri",
    "tos_uri",
    "policy_uri",
    "software_id",
    "software_version",
)


def validate_metadata(raw: object, methods: Sequence[str] = AUTH_METHODS) -> dict[str, Any]:
    """The client metadata we register for a request body; :class:`OAuthError` when refused.

    ``methods``: the token endpoint authentication methods allowed (a
    metadata document has its own, ``auth.client_documents``).
    """
    if not isinstance(raw, dict):
        raise _metadata("The registration request must be a JSON object.")
    uris = raw.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty list of URIs.")
    if len(uris) > MAX_REDIRECT_URIS:
        raise OAuthError("invalid_redirect_uri", f"At most {MAX_REDIRECT_URIS} redirect URIs.")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise OAuthError("invalid_redirect_uri", problem)

    method = raw.get("token_endpoint_auth_method")
    if method is None:
        method = DEFAULT_AUTH_METHOD
    if method not in methods:
        raise _metadata(f"token_endpoint_auth_method must be one of {', '.join(methods)}.")

    grant_types = _string_list(raw, "grant_types", list(GRANT_TYPES))
    unsupported = [g for g in grant_types if g not in GRANT_TYPES]
    if unsupported or "authorization_code" not in grant_types:
        raise _metadata(
            "grant_types may only be authorization_code and refresh_token, "
            "and must include authorization_code."
        )
    response_types = _string_list(raw, "response_types", ["code"])
    if response_types != ["code"]:
        raise _metadata('response_types must be ["code"].')

    scope_value = raw.get("scope")
    if scope_value is not None and not isinstance(scope_value, str):
        raise _metadata("scope must be a space-separated string.")
    scope = canonical(parse_scope(scope_value)) or DEFAULT_SCOPE

    name = raw.get("client_name")
    if name is not None:
        if not isinstance(name, str):
            raise _metadata("client_name must be a string.")
        name = "".join(ch for ch in name if ch.isprintable()).strip()[:MAX_NAME_CHARS] or None
    app_type = raw.get("application_type")
    if app_type is not None and app_type not in ("web", "native"):
        raise _metadata("application_type must be web or native.")

    metadata: dict[str, Any] = {
        "redirect_uris": list(dict.fromkeys(uris)),
        "token_endpoint_auth_method": method,
        "grant_types": list(dict.fromkeys(grant_types)),
        "response_types": ["code"],
        "scope": scope,
    }
    if name is not None:
        metadata["client_name"] = name
    if app_type is not None:
        metadata["application_type"] = app_type
    for key in _ECHOED_STRINGS:
        value = raw.get(key)
        if isinstance(value, str) and 0 < len(value) <= 2000:
            metadata[key] = value
    contacts = raw.get("contacts")
    if isinstance(contacts, list) and all(isinstance(c, str) for c in contacts):
        metadata["contacts"] = contacts[:10]
    return metadata


def _string_list(raw: dict[str, Any], key: str, default: list[str]) -> list[str]:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        raise _metadata(f"{key} must be a non-empty list of strings.")
    return value


def _metadata(description: str) -> OAuthError:
    return OAuthError("invalid_client_metadata", description)


def new_client(client_id: str, metadata: dict[str, Any]) -> NewClient:
    """The row to store for validated ``metadata`` (:func:`validate_metadata`)."""
    return NewClient(
        client_id=client_id,
        client_name=metadata.get("client_name"),
        redirect_uris=metadata["redirect_uris"],
        grant_types=metadata["grant_types"],
        response_types=metadata["response_types"],
        scope=metadata["scope"],
        token_endpoint_auth_method=metadata["token_endpoint_auth_method"],
        application_type=metadata.get("application_type"),
        metadata=metadata,
    )
