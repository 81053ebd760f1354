"""The HTML of the authorization pages: sign in, consent, error.

Plain server-rendered HTML: no JavaScript, no external resources, one
inline stylesheet (allowed by the page's Content-Security-Policy). Every
value is escaped with :func:`html.escape`. Accessibility: ``lang``,
landmarks, one ``h1``, labelled inputs with ``autocomplete``, errors in a
``role="alert"`` region referenced by ``aria-describedby``, visible focus,
text that reflows on a phone (``viewport``; 16px inputs so iOS does not zoom).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from html import escape
from urllib.parse import urlsplit

from auth.csrf import FIELD as CSRF_FIELD
from auth.scopes import DESCRIPTIONS

_STYLE = """
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --bg: #f6f8fa;
  --card: #ffffff; --line: #d0d7de; --accent: #0b5cad; --accent-fg: #ffffff;
  --error-bg: #ffebe9; --error-fg: #82071e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9da7b3;
  --bg: #0d1117; --card: #161b22; --line: #30363d; --accent: #4493f8; --accent-fg: #0d1117;
  --error-bg: #3c1618; --error-fg: #ffa198; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 28rem; margin: 0 auto; padding: 2rem 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 12px;
  padding: 1.5rem; }
.brand { font-weight: 600; color: var(--muted); margin: 0 0 .5rem; }
h1 { font-size: 1.4rem; line-height: 1.3; margin: 0 0 1rem; overflow-wrap: anywhere; }
p { margin: 0 0 1rem; }
.muted { color: var(--muted); font-size: .95rem; }
label { display: block; font-weight: 600; margin: 0 0 .25rem; }
input[type=text], input[type=password] { display: block; width: 100%; font-size: 16px;
  padding: .65rem .75rem; margin: 0 0 1rem; border: 1px solid var(--line); border-radius: 8px;
  background: var(--bg); color: var(--fg); }
button { font: inherit; font-weight: 600; width: 100%; padding: .75rem; border-radius: 8px;
  border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer;
  min-height: 44px; }
button.primary { background: var(--accent); color: var(--accent-fg); border-color: var(--accent); }
.actions { display: flex; gap: .75rem; flex-direction: row-reverse; margin-top: 1.25rem; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.alert { background: var(--error-bg); color: var(--error-fg); border-radius: 8px;
  padding: .75rem; margin: 0 0 1rem; }
ul.scopes { padding-left: 1.25rem; margin: 0 0 1rem; }
ul.scopes li { margin-bottom: .5rem; }
code { overflow-wrap: anywhere; }
.note { margin-top: 1rem; }
.origin { border: 2px solid var(--accent); border-radius: 8px; padding: .75rem;
  margin: 0 0 1rem; }
.origin strong { font-size: 1.15rem; overflow-wrap: anywhere; }
.warning { background: var(--error-bg); color: var(--error-fg); border-radius: 8px;
  padding: .75rem; margin: 0 0 1rem; }
"""


#: The Content-Security-Policy source of the one stylesheet (CSP3 hash source).
STYLE_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode() + "'"


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)} · OwnSona</title><style>{_STYLE}</style></head>"
        '<body><main><div class="card"><p class="brand">OwnSona</p>'
        f"{body}</div></main></body></html>"
    )


def _hidden(fields: Sequence[tuple[str, str]], csrf: str) -> str:
    inputs = [f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields]
    inputs.append(f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(csrf)}">')
    return "".join(inputs)


def _alert(error: str | None) -> str:
    if not error:
        return ""
    return f'<p class="alert" role="alert" id="form-error">{escape(error)}</p>'


def _origin(client_host: str | None) -> str:
    """Who publishes a metadata-document client: its client_id's host, shown prominently.

    The name comes from the client's own document and proves nothing; the
    host is what the user can judge ("Claude" from claude.ai, or not).
    Registered clients say so instead.
    """
    if client_host is None:
        return '<p class="muted">This application is a registered client of this server.</p>'
    return (
        '<p class="origin">This application identifies itself from '
        f"<strong>{escape(client_host)}</strong><br>"
        '<span class="muted">Its name was written by whoever controls that address. '
        "Continue only if that is the application you are connecting.</span></p>"
    )


def login_page(
    *,
    action: str,
    fields: Sequence[tuple[str, str]],
    csrf: str,
    client_name: str,
    username: str = "",
    error: str | None = None,
    client_host: str | None = None,
) -> str:
    """The sign-in form; ``fields`` are the authorization request, carried along."""
    described = ' aria-describedby="form-error" aria-invalid="true"' if error else ""
    body = (
        "<h1>Sign in to connect "
        f"{escape(client_name)}</h1>"
        f"{_origin(client_host) if client_host is not None else ''}"
        f"{_alert(error)}"
        f'<form method="post" action="{escape(action)}">'
        f"{_hidden(fields, csrf)}"
        '<input type="hidden" name="action" value="login">'
        '<label for="username">Username</label>'
        f'<input type="text" id="username" name="username" value="{escape(username)}" '
        'autocomplete="username" autocapitalize="none" spellcheck="false" required'
        f"{described}{'' if username else ' autofocus'}>"
        '<label for="password">Password</label>'
        '<input type="password" id="password" name="password" autocomplete="current-password" '
        f"required{described}{' autofocus' if username else ''}>"
        '<button type="submit" class="primary">Sign in</button>'
        "</form>"
        '<p class="muted note">You will be asked to confirm what '
        f"{escape(client_name)} may do before it gets access.</p>"
    )
    return _page("Sign in", body)


def consent_page(
    *,
    action: str,
    fields: Sequence[tuple[str, str]],
    csrf: str,
    client_name: str,
    username: str,
    scopes: Sequence[str],
    redirect_host: str,
    client_host: str | None = None,
) -> str:
    """Allow or deny: names the client, who publishes it, the account, each scope, where next.

    ``client_host``: the host of a metadata-document client's client_id
    (None for a registered client).
    """
    items = "".join(
        f"<li><strong>{escape(s)}</strong>: {escape(DESCRIPTIONS.get(s, s))}</li>" for s in scopes
    )
    host = urlsplit(f"//{redirect_host}").hostname or ""
    # MCP security considerations: warn when the answer goes to this computer, where any
    # program could be listening (a document cannot prove who runs on localhost).
    warning = (
        '<p class="warning">The answer goes to a program on this computer '
        f"(<code>{escape(redirect_host)}</code>). Allow only if you started that program "
        "yourself just now.</p>"
        if client_host is not None and host in ("localhost", "127.0.0.1", "::1")
        else ""
    )
    body = (
        f"<h1>Allow {escape(client_name)} to use your memory?</h1>"
        f"{_origin(client_host)}"
        f"{warning}"
        f'<p class="muted">Signed in as <strong>{escape(username)}</strong>.</p>'
        f"<p>{escape(client_name)} is asking to:</p>"
        f'<ul class="scopes">{items}</ul>'
        '<p class="muted">If you allow, you will be sent back to '
        f"<code>{escape(redirect_host)}</code>. "
        "Only allow applications you are connecting yourself right now; you can disconnect it "
        f'later on your console\'s <a href="{escape(_apps_url(action))}">Apps page</a>.</p>'
        f'<form method="post" action="{escape(action)}">'
        f"{_hidden(fields, csrf)}"
        '<input type="hidden" name="action" value="consent">'
        '<div class="actions">'
        '<button type="submit" name="decision" value="allow" class="primary">Allow</button>'
        '<button type="submit" name="decision" value="deny">Deny</button>'
        "</div></form>"
    )
    return _page(f"Allow {client_name}", body)


def _apps_url(action: str) -> str:
    """The console's apps page, under the same path prefix as the form's action."""
    return action.removesuffix("/oauth/authorize") + "/console/apps"


def error_page(title: str, message: str) -> str:
    """A dead end the user can understand: nothing is sent to the application."""
    body = (
        f"<h1>{escape(title)}</h1>"
        f'<p role="alert">{escape(message)}</p>'
        '<p class="muted">You can close this page and try connecting again from the '
        "application.</p>"
    )
    return _page(title, body)
