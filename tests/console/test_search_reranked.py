"""The console's search with a reranker set (RERANK_PROVIDER): its order, and why."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from api.runtime import Runtime
from memory.providers.reranker import HttpReranker
from memory.recall.rerank import RerankStage
from tests.api.conftest import Mcp
from tests.providers.rerank_server import FakeReranker, serve_reranker

from .conftest import Browser


@pytest.fixture
def rerank_url() -> Iterator[str]:
    with serve_reranker(FakeReranker(style="jina")) as base_url:
        yield base_url


@pytest.fixture
async def console_runtime(console_runtime: Runtime, rerank_url: str) -> AsyncIterator[Runtime]:
    reranker = HttpReranker(
        style="jina", base_url=rerank_url, client=httpx.AsyncClient(), owns_client=True
    )
    deps = dataclasses.replace(console_runtime.deps, reranker=RerankStage(reranker, depth=10))
    yield dataclasses.replace(console_runtime, deps=deps)
    await reranker.aclose()


async def test_a_search_shows_the_rerankers_order_and_score(
    browser: Browser, owner_mcp: Mcp
) -> None:
    texts = [
        "My sister is a nurse.",
        "I visited my sister last weekend.",
        "Which days does she work? These days my sister does nights.",
    ]
    stored = await owner_mcp.call_tool("remember_batch", {"items": [{"text": t} for t in texts]})
    ids = [r["memory_id"] for r in stored["structuredContent"]["results"]]
    page = await browser.get(
        "/console/memories?q=which+hospital+does+my+sister+work+at+these+days&explain=1"
    )
    assert page.status_code == 200
    shown = [int(i) for i in re.findall(r'name="ids" value="(\d+)"', page.text)]
    assert shown[0] == ids[2]  # the fake cross-encoder's favourite: the most question words
    assert re.search(r"<dt>Reranker</dt><dd>0\.\d{4}; rank \d+ before it</dd>", page.text)
