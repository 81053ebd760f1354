"""Validating an authorization request (OAuth 2.1 §4.1.1; RFC 7636; RFC 8707; RFC 9207).

Two stages, because they fail differently (RFC 6749 §4.1.2.1):

1. :func:`trusted_redirect`: the client exists and the ``redirect_uri`` is
   one it registered, character for character. Until that holds, nothing
   may be sent to the redirect URI: failures are
   :class:`~auth.oauth_errors.AuthorizePageError`, shown to the user.
2. :func:`validate`: everything else. Failures are plain
   :class:`~auth.oauth_errors.OAuthError` and go back to the client as a
   redirect carrying ``error``, ``state`` and ``iss``.

Defaults: ``scope`` absent means the client's registered scope (ChatGPT
omits it on reconnect); unknown scopes are dropped, and only a request
with nothing left is refused. ``resource`` absent means our one resource,
``<OWNSONA_PUBLIC_URL>/mcp``; any other resource is ``invalid_target``.
``state`` is optional (PKCE already protects the client) but, when sent,
is echoed unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from auth.loopback import same_resource
from auth.oauth_errors import AuthorizePageError, OAuthError
from auth.pkce import challenge_problem
from auth.redirects import has_unsafe_characters, is_loopback, is_registered
from auth.scopes import canonical, parse_scope
from storage.oauth import ClientRow

#: The parameters an authorization request carries, echoed into our forms.
PARAMETERS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "code_challenge",
    "code_challenge_method",
    "scope",
    "resource",
    "prompt",
)
MAX_STATE_CHARS = 2048

Params = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class AuthorizationRequest:
    """A validated authorization request: what the code will be bound to."""

    client: ClientRow
    redirect_uri: str
    state: str | None
    code_challenge: str
    #: The scope string the user is asked to allow (never empty).
    scope: str
    resource: str
    #: OIDC-style ``prompt`` values we honour: "login", "consent".
    prompt: frozenset[str]

    @property
    def client_name(self) -> str:
        return self.client.client_name or self.client.client_id


def single(params: Params, name: str) -> str | None:
    """The one value of ``name``; :class:`OAuthError` when it is repeated (RFC 6749 §3.1)."""
    values = [v for k, v in params if k == name]
    if len(values) > 1:
        raise OAuthError("invalid_request", f"{name} must not be repeated.")
    return values[0] if values else None


def named_client_id(params: Params) -> str | None:
    """The client_id to look up: the one value sent, or None when absent or repeated."""
    values = [v for k, v in params if k == "client_id"]
    return values[0] if len(values) == 1 else None


def trusted_redirect(params: Params, client: ClientRow | None) -> str:
    """The redirect URI once the client and URI are verified; :class:`AuthorizePageError` else."""
    try:
        client_id = single(params, "client_id")
        redirect_uri = single(params, "redirect_uri")
    except OAuthError as ex:
        raise AuthorizePageError("invalid_request", ex.description) from None
    if not client_id:
        raise AuthorizePageError("invalid_request", "The request names no client (client_id).")
    if client is None:
        raise AuthorizePageError(
            "invalid_client",
            "This application is not registered with OwnSona. Remove the connection from the "
            "application and add it again.",
        )
    if not redirect_uri:
        raise AuthorizePageError("invalid_request", "The request has no redirect_uri.")
    if has_unsafe_characters(redirect_uri):
        raise AuthorizePageError(
            "invalid_request",
            "The redirect address in this request contains spaces or control characters, so "
            "it is not one the application registered and OwnSona will not send you there.",
        )
    if not is_registered(redirect_uri, client.redirect_uris):
        raise AuthorizePageError(
            "invalid_request",
            "The redirect address in this request is not one the application registered, so "
            "OwnSona will not send you there.",
        )
    return redirect_uri


def validate(
    params: Params, client: ClientRow, redirect_uri: str, resource_url: str
) -> AuthorizationRequest:
    """The request, once every parameter passes; :class:`OAuthError` (redirected) otherwise."""
    response_type = single(params, "response_type")
    if not response_type:
        raise OAuthError("invalid_request", "response_type is required.")
    if response_type != "code":
        raise OAuthError("unsupported_response_type", "Only response_type=code is supported.")
    if "authorization_code" not in client.grant_types:
        raise OAuthError("unauthorized_client", "This client may not use authorization codes.")
    response_mode = single(params, "response_mode")
    if response_mode not in (None, "query"):
        raise OAuthError("invalid_request", "Only response_mode=query is supported.")

    challenge = single(params, "code_challenge")
    problem = challenge_problem(challenge, single(params, "code_challenge_method"))
    if problem is not None:
        raise OAuthError("invalid_request", problem)
    assert challenge is not None

    state = single(params, "state")
    if state is not None and (len(state) > MAX_STATE_CHARS or not state.isprintable()):
        raise OAuthError(
            "invalid_request", f"state has at most {MAX_STATE_CHARS} printable characters."
        )

    # RFC 8707 §2: resource may repeat; we serve exactly one resource.
    resources = [v for k, v in params if k == "resource"]
    if len(resources) > 1 or (resources and not same_resource(resources[0], resource_url)):
        raise OAuthError("invalid_target", f"This server grants access to {resource_url} only.")

    requested = single(params, "scope")
    registered = set(client.scope.split())
    if requested is None or not requested.strip():
        scope = client.scope
    else:
        scope = canonical(s for s in parse_scope(requested) if s in registered)
        if not scope:
            raise OAuthError("invalid_scope", f"Request one or more of: {client.scope}.")

    prompt = frozenset((single(params, "prompt") or "").split()) & {"login", "consent"}
    return AuthorizationRequest(client, redirect_uri, state, challenge, scope, resource_url, prompt)


def echoed_fields(params: Params) -> list[tuple[str, str]]:
    """The authorization parameters to carry in a form's hidden fields, once each."""
    seen: dict[str, str] = {}
    for key, value in params:
        if key in PARAMETERS and key not in seen:
            seen[key] = value
    return list(seen.items())


def consent_given(request: AuthorizationRequest, allowed: str | None) -> bool:
    """True when the user already allowed this request's scope and the request does not ask again.

    A redirect to this machine always asks again: any program here can listen on a loopback
    port and start a sign-in under a public client's id (Claude Code's document, a
    registered client's id), so a remembered consent would hand it a code without a page
    (MCP security considerations: warn on localhost redirects, which the consent page does).
    """
    if allowed is None or "consent" in request.prompt or is_loopback(request.redirect_uri):
        return False
    return set(request.scope.split()) <= set(allowed.split())


def redirect_params(answer: dict[str, str], state: str | None, issuer: str) -> dict[str, str]:
    """The query of a redirect to the client: the answer, ``state`` if sent, ``iss`` (RFC 9207 §2)."""
    params = dict(answer)
    if state is not None:
        params["state"] = state
    params["iss"] = issuer
    return params


def error_answer(ex: OAuthError) -> dict[str, str]:
    """An error answer for the redirect URI (RFC 6749 §4.1.2.1)."""
    return {"error": ex.error, "error_description": ex.description}
