"""auth.client_documents: the document rules, the client's row, and the cache (bounded, per headers)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from auth.client_documents import (
    REFUSAL_TTL_S,
    ClientDocuments,
    client_id_problem,
    document_host,
    published_host,
    validate_document,
)
from auth.metadata_fetch import MAX_TTL_S, FetchError, MetadataFetcher
from auth.oauth_errors import OAuthError
from tests.auth.cimd_server import (
    CHATGPT_PATH,
    CLAUDE_AI_PATH,
    CLAUDE_CODE_PATH,
    DocumentServer,
    Route,
    chatgpt_document,
    claude_ai_document,
    claude_code_document,
    document_server,
    fetcher,
    test_ca,
)
from tests.auth.conftest import FakeClock
from tests.auth.oauth_flow import count, oauth_clean, rows

__all__ = ["document_server", "fetcher", "oauth_clean", "test_ca"]

URL = "https://claude.ai/oauth/mcp-oauth-client-metadata"
JWKS = {"keys": [{"kty": "EC", "crv": "P-256", "x": "x", "y": "y", "kid": "k1"}]}


@pytest.mark.parametrize(
    ("client_id", "ok"),
    [
        (URL, True),
        ("https://chatgpt.com/oauth/client.json", True),
        ("https://claude.ai:8443/oauth/x?v=1", True),
        ("https://claude.ai", False),
        ("https://claude.ai/", False),
        ("https://claude.ai/oauth/../admin", False),
        ("https://claude.ai/./x", False),
        ("https://claude.ai/x#f", False),
        ("https://me@claude.ai/x", False),
        ("https://claude.ai/x y", False),
        ("https://claude.ai/x\r\nInjected: 1", False),
        ("https://claude.ai/" + "x" * 600, False),
        ("https://\u0441laude.ai/oauth/mcp-oauth-client-metadata", False),  # Cyrillic "с"
        ("https://claude.ai/caf\u00e9", False),
        ("https://xn--laude-0ye.ai/oauth/x", True),  # the same host, as a URL spells it
    ],
)
def test_client_id_rules(client_id: str, ok: bool) -> None:
    assert (client_id_problem(client_id) is None) is ok


def test_document_host() -> None:
    assert document_host(URL) == "claude.ai"
    assert document_host("https://Claude.AI:8443/x") == "claude.ai:8443"
    assert document_host("https://[2001:db8::1]/x") == "[2001:db8::1]"


def test_the_published_shapes_are_accepted() -> None:
    claude = validate_document(URL, claude_ai_document(URL))
    assert claude["client_name"] == "Claude"
    assert claude["token_endpoint_auth_method"] == "none"
    assert claude["redirect_uris"][1] == "https://claude.com/api/mcp/auth_callback"
    code_url = "https://claude.ai/oauth/claude-code-client-metadata"
    assert (
        validate_document(code_url, claude_code_document(code_url))["application_type"] == "native"
    )
    gpt_url = "https://chatgpt.com/oauth/client.json"
    gpt = validate_document(gpt_url, chatgpt_document(gpt_url, jwks=JWKS))
    assert gpt["token_endpoint_auth_method"] == "private_key_jwt" and gpt["jwks"] == JWKS
    by_uri = validate_document(
        gpt_url, chatgpt_document(gpt_url, jwks_uri="https://chatgpt.com/jwks")
    )
    assert by_uri["jwks_uri"] == "https://chatgpt.com/jwks"
    minimal = {"client_id": URL, "client_name": "C", "redirect_uris": ["https://c.example/cb"]}
    assert validate_document(URL, minimal)["token_endpoint_auth_method"] == "none"


def _doc(**changes: Any) -> dict[str, Any]:
    document = claude_ai_document(URL)
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return document


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (["not", "an", "object"], "not a JSON object"),
        (
            _doc(client_id="https://evil.example/oauth/mcp-oauth-client-metadata"),
            "client_id is not exactly",
        ),
        (_doc(client_id=URL + "/"), "client_id is not exactly"),
        (_doc(client_id=URL.upper()), "client_id is not exactly"),
        (_doc(client_id=None), "client_id is not exactly"),
        (_doc(client_name=None), "no client_name"),
        (_doc(client_name="   "), "no client_name"),
        (_doc(redirect_uris=None), "no redirect_uris"),
        (_doc(redirect_uris=[]), "non-empty list"),
        (_doc(redirect_uris=["http://claude.ai/cb"]), "http is allowed only on a loopback host"),
        (_doc(redirect_uris=["https://claude.ai/cb#x"]), "fragment"),
        (_doc(client_secret="s3cret"), "client_secret"),
        (_doc(token_endpoint_auth_method="client_secret_basic"), "none, private_key_jwt"),
        (_doc(token_endpoint_auth_method="private_key_jwt"), "exactly one of jwks_uri and jwks"),
        (
            _doc(
                token_endpoint_auth_method="private_key_jwt",
                jwks=JWKS,
                jwks_uri="https://c.example/j",
            ),
            "exactly one of jwks_uri and jwks",
        ),
        (
            _doc(token_endpoint_auth_method="private_key_jwt", jwks_uri="http://c.example/j"),
            "jwks_uri",
        ),
        (_doc(token_endpoint_auth_method="private_key_jwt", jwks={"keys": []}), "1 to 20 keys"),
        (_doc(grant_types=["client_credentials"]), "grant_types"),
        (_doc(response_types=["token"]), "response_types"),
    ],
)
def test_bad_documents_are_refused(raw: Any, reason: str) -> None:
    with pytest.raises(OAuthError) as caught:
        validate_document(URL, raw)
    assert caught.value.error == "invalid_client" and caught.value.status == 401
    assert reason in caught.value.description


# -- the service: the client's row and the cache -------------------------------------------


def _documents(
    pool: Any, fetcher: MetadataFetcher, clock: FakeClock, size: int = 8
) -> ClientDocuments:
    return ClientDocuments(pool, fetcher, max_cached=size, clock=clock)


async def test_a_document_client_gets_a_row_refreshed_from_its_document(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(url), {"Cache-Control": "no-store"}
    )
    documents = _documents(pool, fetcher, clock)
    client = await documents.client(url)
    assert client.client_id == url and client.client_name == "Claude"
    assert client.client_secret_hash is None and client.document_fetched_at is not None
    assert published_host(client) == f"claude.ai:{document_server.port}"

    renamed = {**claude_ai_document(url), "client_name": "Claude (new)"}
    document_server.serve_json(CLAUDE_AI_PATH, renamed, {"Cache-Control": "no-store"})
    again = await documents.client(url)
    assert again.client_name == "Claude (new)"
    assert rows(oauth_clean, "SELECT client_name FROM oauth_clients WHERE client_id = %s", url) == [
        ("Claude (new)",)
    ]
    assert count(oauth_clean, "oauth_clients") == 1


async def test_a_registered_client_row_is_never_overwritten(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    with psycopg.connect(oauth_clean, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, grant_types,"
            " response_types, scope, token_endpoint_auth_method)"
            " VALUES (%s, 'Operator', %s, %s, %s, 'memory:read', 'none')",
            (url, ["https://ops.example/cb"], ["authorization_code"], ["code"]),
        )
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    with pytest.raises(OAuthError, match="a registered client already has this client_id"):
        await _documents(pool, fetcher, clock).client(url)
    assert rows(oauth_clean, "SELECT client_name FROM oauth_clients") == [("Operator",)]


async def test_max_age_is_honoured(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(url), {"Cache-Control": "max-age=60"}
    )
    documents = _documents(pool, fetcher, clock)
    for _ in range(3):
        await documents.client(url)
    assert document_server.hits[CLAUDE_AI_PATH] == 1
    clock.advance(59)
    await documents.client(url)
    assert document_server.hits[CLAUDE_AI_PATH] == 1
    clock.advance(2)
    await documents.client(url)
    assert document_server.hits[CLAUDE_AI_PATH] == 2


async def test_no_store_is_fetched_on_every_use(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    document_server.serve_json(
        CLAUDE_AI_PATH, claude_ai_document(url), {"Cache-Control": "no-store"}
    )
    documents = _documents(pool, fetcher, clock)
    for _ in range(3):
        await documents.client(url)
    assert document_server.hits[CLAUDE_AI_PATH] == 3
    assert documents.cached == 0


async def test_the_cache_is_bounded_in_time_and_size(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    paths = [CLAUDE_AI_PATH, CLAUDE_CODE_PATH, "/third.json"]
    urls = [document_server.url("claude.ai", p) for p in paths]
    for path, url in zip(paths, urls, strict=True):
        document_server.serve_json(
            path, claude_ai_document(url), {"Cache-Control": "max-age=999999999"}
        )
    documents = _documents(pool, fetcher, clock, size=2)
    for url in urls:
        await documents.client(url)
    assert documents.cached == 2
    # The least recently used (the first) was evicted; the other two are still cached.
    await documents.client(urls[2])
    await documents.client(urls[1])
    assert [document_server.hits[p] for p in paths] == [1, 1, 1]
    await documents.client(urls[0])
    assert [document_server.hits[p] for p in paths] == [2, 1, 1]
    # However long a document asks to be kept, it is fetched again after MAX_TTL_S.
    clock.advance(MAX_TTL_S + 1)
    await documents.client(urls[0])
    assert document_server.hits[paths[0]] == 3


async def test_a_refused_document_is_refused_again_for_a_while_then_refetched(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    # Anyone can name a URL at /oauth/authorize: a refusal is remembered for
    # REFUSAL_TTL_S (whatever the document's own caching says), so repeating the request
    # costs no fetch; then the URL is fetched again, and a fixed document works.
    url = document_server.url("claude.ai", CLAUDE_AI_PATH)
    wrong = claude_ai_document(document_server.url("evil.example", CLAUDE_AI_PATH))
    document_server.serve_json(CLAUDE_AI_PATH, wrong, {"Cache-Control": "max-age=600"})
    documents = _documents(pool, fetcher, clock)
    for _ in range(3):
        with pytest.raises(OAuthError, match="client_id is not exactly"):
            await documents.client(url)
    assert document_server.hits[CLAUDE_AI_PATH] == 1
    assert count(oauth_clean, "oauth_clients") == 0
    document_server.serve_json(CLAUDE_AI_PATH, claude_ai_document(url))
    clock.advance(REFUSAL_TTL_S + 1)
    assert (await documents.client(url)).client_id == url
    assert document_server.hits[CLAUDE_AI_PATH] == 2


async def test_an_unknown_kid_refetches_the_key_set_at_most_once_a_while(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    url = document_server.url("chatgpt.com", CHATGPT_PATH)
    jwks_uri = document_server.url("chatgpt.com", "/jwks.json")
    document_server.serve_json(CHATGPT_PATH, chatgpt_document(url, jwks_uri=jwks_uri))
    document_server.serve_json("/jwks.json", JWKS, {"Cache-Control": "max-age=300"})
    documents = _documents(pool, fetcher, clock)
    client = await documents.client(url)
    for _ in range(5):  # assertions naming a kid we do not know, one after another
        assert await documents.keys(client, fresh=True) == JWKS
    assert document_server.hits["/jwks.json"] == 1
    clock.advance(REFUSAL_TTL_S + 1)
    await documents.keys(client, fresh=True)
    assert document_server.hits["/jwks.json"] == 2


async def test_a_deeply_nested_document_is_refused_not_a_crash(
    fetcher: MetadataFetcher, document_server: DocumentServer
) -> None:
    document_server.routes["/deep.json"] = Route(200, b"[" * 50_000)
    with pytest.raises(FetchError, match="not valid JSON"):
        await fetcher.fetch_json(document_server.url("claude.ai", "/deep.json"))


async def test_jwks_uri_keys_are_fetched_under_the_same_rules_and_cached(
    pool: Any,
    oauth_clean: str,
    fetcher: MetadataFetcher,
    document_server: DocumentServer,
    clock: FakeClock,
) -> None:
    url = document_server.url("chatgpt.com", CHATGPT_PATH)
    jwks_uri = document_server.url("chatgpt.com", "/jwks.json")
    document_server.serve_json(CHATGPT_PATH, chatgpt_document(url, jwks_uri=jwks_uri))
    document_server.serve_json("/jwks.json", JWKS, {"Cache-Control": "max-age=300"})
    documents = _documents(pool, fetcher, clock)
    client = await documents.client(url)
    assert await documents.keys(client) == JWKS
    assert await documents.keys(client) == JWKS
    assert document_server.hits["/jwks.json"] == 1
    assert await documents.keys(client, fresh=True) == JWKS
    assert document_server.hits["/jwks.json"] == 2
    # A jwks_uri pointing inside the network is refused like a document would be.
    internal = chatgpt_document(
        url, jwks_uri=f"https://internal.example:{document_server.port}/jwks.json"
    )
    document_server.serve_json(CHATGPT_PATH, internal)
    clock.advance(MAX_TTL_S + 1)
    client = await documents.client(url)
    with pytest.raises(OAuthError, match="JWK set .* a private address"):
        await documents.keys(client)
