"""A local rerank server speaking TEI's and Jina's ``/rerank`` wire formats.

Its "cross-encoder" scores a document by the query words it contains (words of
four letters or more), so a test knows which document it ranks first. Replies
follow ``script`` first (a status, a raw body or a delay), then succeed.
"""

from __future__ import annotations

import json
import re
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.providers.local_http import serve_local

_WORD = re.compile(r"\w{4,}")
#: TEI's ``--max-client-batch-size`` default: more texts in one request get a 422.
TEI_MAX_CLIENT_BATCH = 32


def relevance(query: str, document: str) -> float:
    """The fake cross-encoder: the share of the query's words the document holds."""
    wanted = set(_WORD.findall(query.lower()))
    return len(wanted & set(_WORD.findall(document.lower()))) / max(1, len(wanted))


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None  # None: a correct answer
    delay_s: float = 0.0


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeReranker:
    """Answers ``POST .../rerank`` in the ``style`` it is told: "tei" or "jina"."""

    style: str
    #: Most documents scored in one answer (a server capping ``top_n``); None: all.
    top_n_cap: int | None = None
    script: list[Reply] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self.script.pop(0) if self.script else Reply()

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        key = "texts" if self.style == "tei" else "documents"
        if self.style == "tei" and len(body[key]) > TEI_MAX_CLIENT_BATCH:
            return 422, json.dumps({
                "error": f"batch size {len(body[key])} > maximum allowed batch size 32",
                "error_type": "Validation",
            }).encode()  # fmt: skip
        scored = [(i, relevance(body["query"], document)) for i, document in enumerate(body[key])]
        scored.sort(key=lambda pair: -pair[1])  # both servers answer best first
        if self.top_n_cap is not None:
            scored = scored[: self.top_n_cap]
        if self.style == "tei":
            return 200, json.dumps([{"index": i, "score": s} for i, s in scored]).encode()
        results = [{"index": i, "relevance_score": s} for i, s in scored]
        return 200, json.dumps({"model": body.get("model"), "results": results}).encode()


def _handler(fake: FakeReranker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            reply = fake.next_reply(request)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if not request.path.endswith("/rerank"):
                reply = Reply(404, b'{"error": "not found"}')
            status, content = reply.status, reply.body
            if content is None:
                status, content = fake.answer(body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (time-out tests)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve_reranker(fake: FakeReranker) -> AbstractContextManager[str]:
    """Serve ``fake`` on a free loopback port; yields its ``RERANK_BASE_URL``."""
    return serve_local(_handler(fake))
