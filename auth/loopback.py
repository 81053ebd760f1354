"""``localhost`` and ``127.0.0.1``: two names of one loopback server, for the resource only.

The embedded default serves ``http://127.0.0.1:PORT``; a user who types
``http://localhost:PORT/mcp`` into a client reaches the same process, but the
official SDK refuses protected-resource metadata naming another host
(RFC 8707 / RFC 9728 compare the resource as a URL). So, for an ``http``
resource on one of these two names, the other name with the same port is the
same resource: the metadata names the one the client used, and an
authorization or token request naming either is accepted. The issuer and the
tokens' ``aud`` stay the configured URL's, so tokens minted for one name
(``ownsona token``) work on the other. Any other URL compares as a string,
exactly as before.
"""

from __future__ import annotations

from urllib.parse import urlsplit

#: Host names that are one loopback server; ``::1`` is left out (not what anyone types).
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def _canonical(url: str) -> str:
    url = url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK_NAMES or parts.port is None:
        return url
    return f"http://127.0.0.1:{parts.port}{parts.path}"


def same_resource(requested: str, resource: str) -> bool:
    """``requested`` names ``resource`` (trailing slashes aside), or its loopback twin."""
    return _canonical(requested) == _canonical(resource)


def resource_for_host(resource: str, host: str | None) -> str:
    """``resource`` as named by a client that sent ``Host: host``: its loopback twin, or itself."""
    if not host:
        return resource
    parts = urlsplit(resource)
    candidate = f"{parts.scheme}://{host.strip().lower()}{parts.path}"
    if candidate != resource and same_resource(candidate, resource):
        return candidate
    return resource
