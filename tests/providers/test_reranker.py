"""The HTTP reranker against a real local server speaking TEI's and Jina's wire formats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from bootstrap.providers import make_rerank_stage, rerank_endpoint
from config.settings import Settings, SettingsError
from memory.providers.reranker import (
    MAX_DOCUMENT_CHARS,
    MAX_QUERY_CHARS,
    TEI_BATCH,
    HttpReranker,
    clip,
    shown_url,
)
from memory.recall.rerank import RerankError

from .rerank_server import FakeReranker, Reply, relevance, serve_reranker

API_KEY = "rk-test-secret-key"
QUERY = "Which hospital does my sister work at?"
DOCUMENTS = [
    "I had pasta for dinner.",
    "Ana works at the hospital in Braga.",
    "My sister Ana works as a nurse at the hospital.",
]


@pytest.fixture(params=["tei", "jina"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[FakeReranker, str]]:
    fake = FakeReranker(style=request.param)
    with serve_reranker(fake) as base_url:
        yield fake, base_url


MakeReranker = Callable[..., HttpReranker]


@pytest.fixture
async def make(server: tuple[FakeReranker, str]) -> AsyncIterator[MakeReranker]:
    fake, base_url = server
    made: list[HttpReranker] = []

    def build(**options: Any) -> HttpReranker:
        config: dict[str, Any] = {
            "style": fake.style,
            "base_url": base_url,
            "model": "rerank-test",
            "api_key": API_KEY,
            "timeout_s": 5.0,
            "client": httpx.AsyncClient(),
            "owns_client": True,
        }
        config.update(options)
        reranker = HttpReranker(**config)
        made.append(reranker)
        return reranker

    yield build
    for reranker in made:
        await reranker.aclose()


async def test_scores_come_back_in_document_order(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    scores = await make().rerank(QUERY, DOCUMENTS)

    # The server answers best first; the scores are put back in the documents' order.
    assert scores == [relevance(QUERY, d) for d in DOCUMENTS]
    assert scores[2] > scores[1] > scores[0]
    (request,) = fake.requests
    assert request.path == "/v1/rerank"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    if fake.style == "tei":
        assert request.body == {"query": QUERY, "texts": DOCUMENTS, "truncate": True}
    else:
        assert request.body == {
            "model": "rerank-test",
            "query": QUERY,
            "documents": DOCUMENTS,
            "top_n": 3,
        }


async def test_long_documents_are_cut_at_a_space(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    long = "hospital " * 2000  # 18,000 characters
    await make(api_key=None, model=None).rerank(QUERY, [long, "short"])

    (request,) = fake.requests
    sent = request.body["texts" if fake.style == "tei" else "documents"]
    assert len(sent[0]) <= MAX_DOCUMENT_CHARS and sent[0] == clip(long)
    assert sent[0].endswith("hospital") and sent[1] == "short"
    assert "authorization" not in request.headers and "model" not in request.body


@pytest.mark.parametrize(
    "reply, tei_says, jina_says",
    [
        (Reply(status=500, body=b'{"error": "boom"}'), "HTTP 500", "HTTP 500"),
        (Reply(status=401, body=b'{"error": "bad key"}'), "HTTP 401", "HTTP 401"),
        (Reply(body=b"<html>gateway</html>"), "other than JSON", "other than JSON"),
        (Reply(body=b'{"unexpected": true}'), "without a list", "without a list"),
        (Reply(body=b"[]"), "scored none of 3", "without a list"),
        (Reply(body=b'{"results": []}'), "without a list", "scored none of 3"),
        (Reply(body=b'{"results": [{"index": 0, "relevance_score": 1' + b"0" * 400 + b"}]}"),
         "without a list", "malformed"),
        (Reply(body=b"[" * 100_000 + b"]" * 100_000), "other than JSON", "other than JSON"),
        (Reply(body=b'{"results": [{"index": 7, "relevance_score": 1}]}'), "without a list",
         "malformed"),
        (Reply(body=b'[{"index": 0, "score": "high"}]'), "malformed", "without a list"),
        (Reply(body=b'[{"index": 0, "score": 1}, {"index": 0, "score": 1}]'), "malformed",
         "without a list"),
    ],
)  # fmt: skip
async def test_bad_answers_raise_a_rerank_error_without_texts(
    server: tuple[FakeReranker, str],
    make: MakeReranker,
    reply: Reply,
    tei_says: str,
    jina_says: str,
) -> None:
    fake, _ = server
    fake.script.append(reply)
    with pytest.raises(RerankError) as caught:
        await make().rerank(QUERY, DOCUMENTS)
    message = str(caught.value)
    assert (tei_says if fake.style == "tei" else jina_says) in message
    assert "Ana" not in message and QUERY not in message and API_KEY not in message


async def test_input_refusals_are_told_apart_from_a_failing_endpoint(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    for status, endpoint_failed in ((422, False), (413, False), (400, False), (401, True),
                                    (404, True), (429, True), (503, True)):  # fmt: skip
        fake.script.append(Reply(status=status, body=b'{"error": "no"}'))
        with pytest.raises(RerankError) as caught:
            await make().rerank(QUERY, DOCUMENTS)
        assert caught.value.endpoint_failed is endpoint_failed, status


async def test_more_texts_than_a_tei_batch_go_in_several_requests(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    documents = [f"note {i} about my sister" if i % 7 == 0 else f"note {i}" for i in range(70)]
    scores = await make().rerank("my sister", documents)

    assert scores == [relevance("my sister", d) for d in documents]
    sizes = sorted(
        len(r.body["texts" if fake.style == "tei" else "documents"]) for r in fake.requests
    )
    assert sizes == ([6, TEI_BATCH, TEI_BATCH] if fake.style == "tei" else [70])


async def test_documents_a_capped_answer_leaves_out_have_no_score(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    fake.top_n_cap = 2
    scores = await make().rerank(QUERY, DOCUMENTS)
    assert scores == [None, relevance(QUERY, DOCUMENTS[1]), relevance(QUERY, DOCUMENTS[2])]


async def test_a_long_question_is_cut_too(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    await make().rerank("sister " * 1000, DOCUMENTS)
    (request,) = fake.requests
    assert request.body["query"] == clip("sister " * 1000, MAX_QUERY_CHARS)
    assert len(request.body["query"]) <= MAX_QUERY_CHARS


async def test_a_cancelled_call_is_not_counted_as_a_failure(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    fake.script.append(Reply(delay_s=0.5))
    seen: list[bool] = []
    reranker = make()
    reranker.add_observer(lambda seconds, ok: seen.append(ok))
    call = asyncio.ensure_future(reranker.rerank(QUERY, DOCUMENTS))
    await asyncio.sleep(0.1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await reranker.rerank(QUERY, DOCUMENTS)
    assert seen == [True, True]


def test_a_base_url_is_shown_without_its_password() -> None:
    assert shown_url("https://bob:s3cret@rerank.example:8443/v1/rerank") == (
        "https://rerank.example:8443/v1/rerank"
    )
    assert shown_url("http://[::1]:8080/rerank") == "http://[::1]:8080/rerank"
    reranker = HttpReranker(
        style="tei", base_url="https://bob:s3cret@rerank.example/v1", client=httpx.AsyncClient()
    )
    assert (
        "s3cret" not in repr(reranker) and reranker.endpoint == "https://rerank.example/v1/rerank"
    )


async def test_a_slow_server_is_given_up_on(
    server: tuple[FakeReranker, str], make: MakeReranker
) -> None:
    fake, _ = server
    fake.script.append(Reply(delay_s=1.0))
    with pytest.raises(RerankError, match="did not answer within 0.2 s"):
        await make(timeout_s=0.2).rerank(QUERY, DOCUMENTS)


async def test_an_unreachable_server_raises_a_rerank_error() -> None:
    reranker = HttpReranker(
        style="tei", base_url="http://127.0.0.1:9/v1", client=httpx.AsyncClient(), owns_client=True
    )
    with pytest.raises(RerankError, match="could not be reached"):
        await reranker.rerank(QUERY, DOCUMENTS)
    await reranker.aclose()


async def test_the_settings_name_the_endpoint() -> None:
    assert make_rerank_stage(Settings()) is None
    with pytest.raises(SettingsError, match="RERANK_BASE_URL"):
        Settings.from_env({"RERANK_PROVIDER": "tei", "HOME": "/tmp"})
    with pytest.raises(SettingsError, match="RERANK_PROVIDER"):
        Settings.from_env({"RERANK_PROVIDER": "cohere-ish", "HOME": "/tmp"})
    for bad in ("localhost:8080", "http://127.0.0.1:99999/v1", "http://[::1/v1", "http:///v1"):
        with pytest.raises(SettingsError, match="RERANK_BASE_URL"):
            Settings.from_env({"RERANK_PROVIDER": "jina", "RERANK_BASE_URL": bad, "HOME": "/tmp"})
    settings = Settings.from_env(
        {
            "RERANK_PROVIDER": "JINA",
            "RERANK_BASE_URL": "http://127.0.0.1:8080/v1",
            "RERANK_CANDIDATES": "40",
            "HOME": "/tmp",
        }
    )
    stage = make_rerank_stage(settings)
    assert stage is not None and stage.depth == 40
    assert isinstance(stage.reranker, HttpReranker) and stage.reranker.style == "jina"
    await stage.reranker.aclose()
    # What `ownsona serve` prints: the endpoint without the password a URL may carry.
    assert rerank_endpoint(Settings()) is None
    shown = rerank_endpoint(
        settings.with_overrides(rerank_base_url="https://bob:s3cret@rerank.example/v1/")
    )
    assert shown == "https://rerank.example/v1/rerank"
