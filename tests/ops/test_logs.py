"""Logs: JSON lines with request ids, and never memory text, passwords or tokens.

The main test runs a real ``ownsona serve`` (LOG_LEVEL=DEBUG) twice: with
its in-process worker, and with Redis and a separate ``ownsona worker``.
It signs in through the OAuth pages (once with a wrong password), calls
every tool with distinctive facts over HTTP, then reads everything the
processes wrote.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import dramatiq
import falcon.testing
import httpx
import psycopg
import pytest

from api.app import create_app
from api.mcp.tools import tool_specs
from api.runtime import Runtime
from bootstrap.logs import log_handler, safe_exception_text
from config.settings import Settings
from memory.deps import Deps
from tests.auth.oauth_flow import parse_form, pkce_pair
from tests.conftest import SESSION_MASTER_KEY, sealing_env
from tests.e2e.server import free_port
from tests.tool_samples import sample_arguments

ROOT = Path(__file__).resolve().parents[2]

#: The account's password, and a wrong one tried first: neither may be logged.
PASSWORD = "Tangerine-Obelisk-4417-pw"
WRONG_PASSWORD = "Wrong-Quokka-Password-9931"
#: A made-up bearer token sent once; it must not be echoed into a log.
BOGUS_TOKEN = "bogus-token-Zephyr5521-never-logged"
#: An OAuth ``state`` (query string): access lines carry paths only.
STATE = "state-Halcyon7719-query-only"
#: One invented word per fact: finding it anywhere in the logs means text leaked.
FACTS = {
    "Quillonvar": "My neighbour Quillonvar keeps bees on the roof of the bakery.",
    "Brastemund": "Our holiday cabin is in Brastemund, next to the frozen lake.",
    "Oskovette": "My daughter's violin teacher is called Oskovette.",
    "Tralmirion": "I park my bicycle behind the Tralmirion library every Tuesday.",
    "Perlavask": "My doctor recommended Perlavask tea for my sore throat.",
    "Zundelkorn": "The wifi at my parents' house is named Zundelkorn.",
}
#: Text that only ever travels in queries and edits.
QUERY_WORD = "Vimbledrake"
UPDATED_WORD = "Harrowquist"
SECRET_LIKE = "sk-proj-Xyl0phoneQuartz9981abcdefGHIJKLMNOP"


@dataclass
class Proc:
    process: subprocess.Popen
    stdout: Path
    stderr: Path
    files: list[Any]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for handle in self.files:
            handle.close()


@dataclass
class Seen:
    """What the client sent and received that must not show up in a log."""

    secrets: list[str] = field(default_factory=list)
    #: Request id sent -> (tool or None, queued?)
    requests: dict[str, tuple[str | None, bool]] = field(default_factory=dict)


def start(args: list[str], env: dict[str, str], tmp_path: Path, name: str) -> Proc:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    files = [out.open("w"), err.open("w")]
    process = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", *args],
        env=env,
        cwd=ROOT,
        stdout=files[0],
        stderr=files[1],
    )
    return Proc(process, out, err, files)


def wait_healthy(url: str, proc: Proc, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.process.poll() is not None:
            raise AssertionError(f"server exited:\n{proc.stderr.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"server did not come up:\n{proc.stderr.read_text()}")


@contextmanager
def running(tmp_path: Path, dsn: str, redis_url: str | None) -> Iterator[tuple[str, list[Proc]]]:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OWNSONA_", "EMBEDDING_", "LOG_", "METRICS_"))
        and k not in ("DATABASE_URL", "REDIS_URL", "PORT")
    }
    env.update(
        sealing_env(),  # the session database's key store was sealed with it
        DATABASE_URL=dsn,
        PORT=str(port),
        OWNSONA_DATA_DIR=str(tmp_path / "data"),
        OWNSONA_LOGIN_USERNAME="e2e",
        OWNSONA_LOGIN_PASSWORD=PASSWORD,
        LOG_LEVEL="DEBUG",
        LOG_FORMAT="json",
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    procs = [start(["serve"], env, tmp_path, "serve")]
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, procs[0])
        if redis_url:
            procs.append(start(["worker", "--threads", "2"], env, tmp_path, "worker"))
        yield url, procs
    finally:
        for proc in reversed(procs):
            proc.stop()


def sign_in(http: httpx.Client, url: str, seen: Seen) -> str:
    """The OAuth flow a client runs: register, a wrong password, the right one, allow, token."""
    redirect_uri = "http://127.0.0.1:9/callback"
    registered = http.post(
        "/oauth/register", json={"redirect_uris": [redirect_uri], "client_name": "log test"}
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce_pair()
    params = {
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
        "state": STATE, "code_challenge": challenge, "code_challenge_method": "S256",
        "scope": "memory:read memory:write", "resource": f"{url}/mcp",
    }  # fmt: skip
    page = http.get("/oauth/authorize", params=params)
    assert page.status_code == 200 and 'name="password"' in page.text, page.text[:500]

    def submit(page: httpx.Response, **values: str) -> httpx.Response:
        form = parse_form(page.text)
        fields = [(k, v) for k, v in form["fields"] if k not in values] + list(values.items())
        return http.post(form["action"], data=dict(fields))

    refused = submit(page, username="e2e", password=WRONG_PASSWORD)
    assert refused.status_code == 400 and "Incorrect username or password" in refused.text
    consent = submit(refused, username="e2e", password=PASSWORD)
    assert consent.status_code == 200 and "Allow" in consent.text, consent.text[:500]
    redirect = submit(consent, decision="allow")
    assert redirect.status_code in (302, 303), redirect.text[:500]
    code = parse_qs(urlsplit(redirect.headers["location"]).query)["code"][0]
    issued = http.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "client_id": client_id, "code_verifier": verifier, "resource": f"{url}/mcp",
        },
    )  # fmt: skip
    assert issued.status_code == 200, issued.text
    tokens = issued.json()
    seen.secrets += [code, verifier, tokens["access_token"], tokens["refresh_token"]]
    # The signature alone is what makes a JWT a credential.
    seen.secrets.append(tokens["access_token"].rsplit(".", 1)[-1])
    return str(tokens["access_token"])


class Tools:
    """tools/call over HTTP, each request with an X-Request-Id of its own."""

    def __init__(self, http: httpx.Client, token: str, seen: Seen) -> None:
        self.http = http
        self.token = token
        self.seen = seen
        self.n = 0

    def call(self, name: str, arguments: dict[str, Any], *, queued: bool) -> dict[str, Any]:
        self.n += 1
        request_id = f"logtest-{self.n}-{name}"
        answer = self.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": self.n, "method": "tools/call",
                  "params": {"name": name, "arguments": arguments}},
            headers={"Authorization": f"Bearer {self.token}", "X-Request-Id": request_id,
                     "Accept": "application/json, text/event-stream"},
            timeout=90,
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-request-id"] == request_id
        self.seen.requests[request_id] = (name, queued)
        return dict(answer.json()["result"]["structuredContent"])


def drive_every_tool(http: httpx.Client, token: str, seen: Seen) -> None:
    tools = Tools(http, token, seen)
    words = list(FACTS)
    first = tools.call("remember", {"text": FACTS[words[0]], "tags": ["garden"]}, queued=True)
    assert first["ok"], first
    batch = tools.call(
        "remember_batch", {"items": [{"text": FACTS[w]} for w in words[1:5]]}, queued=True
    )
    assert batch["summary"]["succeeded"] == 4, batch
    ids = [first["memory_id"], *(item["memory_id"] for item in batch["results"])]
    last = tools.call("remember", {"text": FACTS[words[5]]}, queued=True)
    refused = tools.call("remember", {"text": f"My OpenAI key is {SECRET_LIKE}"}, queued=False)
    assert refused["ok"] is False
    edited = f"My neighbour {UPDATED_WORD} keeps bees on the roof of the bakery."
    assert tools.call("update_memory", {"id": ids[0], "text": edited}, queued=True)["ok"]
    assert tools.call(
        "update_memory_batch", {"items": [{"id": ids[1], "tags": ["travel"]}]}, queued=True
    )["ok"]
    assert tools.call("confirm", {"id": ids[2]}, queued=True)["ok"]
    assert tools.call(
        "reinforce", {"memory_ids": [ids[3]], "query": f"{QUERY_WORD} bicycle"}, queued=True
    )["ok"]
    found = tools.call("recall", {"query": f"where do {QUERY_WORD} bees live"}, queued=False)
    assert found["ok"] and found["matches"]
    assert tools.call("search_memory", {"query": "Brastemund cabin"}, queued=False)["ok"]
    assert tools.call("build_context_prompt", {"user_prompt": "Perlavask tea?"}, queued=False)["ok"]
    assert tools.call("text_search", {"text": "Oskovette"}, queued=False)["ok"]
    assert tools.call("get_memory", {"id": ids[1]}, queued=False)["ok"]
    assert tools.call("get_memory", {"id": 987654}, queued=False)["ok"] is False
    for name in ("list_memories", "count_memories", "memory_stats", "list_tags"):
        assert tools.call(name, {}, queued=False)["ok"], name
    exported = tools.call("export_memories", {"include_deleted": True}, queued=False)
    assert exported["ok"] and len(exported["memories"]) >= 6
    assert tools.call("query_relations", {"entity": "Quillonvar"}, queued=False)["ok"]
    assert tools.call("find_near_duplicates", {}, queued=True)["ok"]
    assert tools.call("find_conflicts", {}, queued=True)["ok"]
    # A tool the calls above leave out (one added since): its sample (tests.tool_samples).
    called = {name for name, _ in seen.requests.values()} | {"forget", "forget_batch"}
    for name, spec in tool_specs(Settings()).items():
        if name not in called:
            assert tools.call(name, sample_arguments(spec, ids[0]), queued=spec.queued)["ok"], name
    assert tools.call("forget", {"id": ids[4], "reason": "Zundelkorn moved"}, queued=True)["ok"]
    assert tools.call("forget_batch", {"ids": [last["memory_id"]]}, queued=True)["ok"]

    # A wrong token, and a request id not worth keeping (replaced by a fresh one).
    denied = http.post("/mcp", json={}, headers={"Authorization": f"Bearer {BOGUS_TOKEN}"})
    assert denied.status_code == 401
    odd = http.get("/healthz", headers={"X-Request-Id": 'has spaces "and quotes"'})
    assert len(odd.headers["x-request-id"]) == 32 and " " not in odd.headers["x-request-id"]


def json_lines(path: Path) -> list[dict[str, Any]]:
    entries = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)  # every line on stderr is one JSON object
        assert {"time", "level", "logger", "message", "request_id"} <= entry.keys(), entry
        entries.append(entry)
    return entries


@pytest.mark.parametrize("mode", ["in-process", "redis"])
def test_logs_are_json_lines_with_request_ids_and_no_secrets(
    mode: str, tmp_path: Path, clean_db: str, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if mode == "redis" else None
    # The master key too: every process here has it (sealing_env).
    seen = Seen(
        secrets=[PASSWORD, WRONG_PASSWORD, BOGUS_TOKEN, STATE, SECRET_LIKE, SESSION_MASTER_KEY]
    )
    with running(tmp_path, clean_db, redis_url) as (url, procs):
        with httpx.Client(base_url=url, timeout=30) as http:
            token = sign_in(http, url, seen)
            drive_every_tool(http, token, seen)
        time.sleep(0.5)  # background relation extraction finishes and logs too
    outputs = [p.read_text(errors="replace") for proc in procs for p in (proc.stdout, proc.stderr)]
    everything = "\n".join(outputs)
    lowered = everything.lower()

    for word in [*FACTS, QUERY_WORD, UPDATED_WORD]:
        assert word.lower() not in lowered, f"{word!r} was logged"
    for fact in FACTS.values():
        assert fact.lower() not in lowered
    for secret in seen.secrets:
        assert secret not in everything, f"a secret was logged: {secret[:12]}..."

    server = json_lines(procs[0].stderr)
    worker = json_lines(procs[1].stderr) if len(procs) > 1 else server
    assert any(e["level"] == "DEBUG" for e in server)  # LOG_LEVEL=DEBUG took effect
    for request_id, (tool, queued) in seen.requests.items():
        mine = [e for e in server if e["request_id"] == request_id]
        access = [e for e in mine if e["logger"] == "ownsona.access"]
        assert len(access) == 1, (request_id, mine)
        assert access[0]["path"] == "/mcp" and access[0]["status"] == 200
        assert any(e["logger"] == "ownsona.api.mcp" and e.get("tool") == tool for e in mine)
        if queued:
            processed = [
                e
                for e in worker
                if e["request_id"] == request_id and e.get("actor") == "run_command"
            ]
            assert len(processed) == 1 and processed[0]["use_case"], (request_id, processed)
    # Relation extraction, queued by a write, carries that write's request id along.
    assert any(
        e.get("actor") == "extract_relations" and e["request_id"] in seen.requests for e in worker
    )
    # The authorization request's query string stayed out; its path is there.
    paths = [e.get("path") for e in server if e["logger"] == "ownsona.access"]
    assert "/oauth/authorize" in paths and "/oauth/token" in paths
    # The failed sign-in is logged (as such, by username), without its password.
    assert any("sign-in failed" in e["message"] for e in server)


# --- in process ---------------------------------------------------------------


async def test_request_id_is_echoed_when_sane_and_made_up_otherwise(
    pool: Any, embedder: Any
) -> None:
    settings = Settings(public_url="https://mem.example")
    deps = Deps(settings=settings, pool=pool, embedder=embedder)
    runtime = Runtime(settings, deps, None, None, None)  # type: ignore[arg-type]
    async with falcon.testing.ASGIConductor(create_app(settings, runtime=runtime)) as c:
        echoed = await c.simulate_get("/healthz", headers={"X-Request-Id": "abc-123.def:9"})
        fresh = await c.simulate_get("/healthz")
        too_long = await c.simulate_get("/healthz", headers={"X-Request-Id": "a" * 200})
        missing = await c.simulate_get("/no-such-page", headers={"X-Request-Id": "lost-1"})
    assert echoed.headers["x-request-id"] == "abc-123.def:9"
    assert len(fresh.headers["x-request-id"]) == 32
    assert len(too_long.headers["x-request-id"]) == 32
    assert fresh.headers["x-request-id"] != too_long.headers["x-request-id"]
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "lost-1"


def capture(fmt: str = "json") -> tuple[logging.Logger, io.StringIO]:
    buffer = io.StringIO()
    logger = logging.getLogger(f"tests.ops.logs.{fmt}.{time.monotonic_ns()}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(log_handler(fmt, buffer))
    return logger, buffer


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_database_error_text_never_reaches_a_log(clean_db: str, fmt: str) -> None:
    logger, buffer = capture(fmt)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        # PostgreSQL quotes the failing input and row: the very thing a log must not keep.
        conn.execute("CREATE TEMP TABLE t (note text CHECK (length(note) < 5))")
        for statement, params in (
            ("SELECT %s::int", ("Oskovette-violin-teacher",)),
            ("INSERT INTO t VALUES (%s)", ("Oskovette plays the violin",)),
        ):
            try:
                try:
                    conn.execute(statement, params)
                except psycopg.Error as ex:
                    raise RuntimeError("the write failed") from ex
            except RuntimeError:
                logger.exception("write failed")
    output = buffer.getvalue()
    assert "Oskovette" not in output
    assert "SQLSTATE 22P02" in output  # invalid_text_representation
    assert "SQLSTATE 23514" in output and "constraint t_note_check" in output
    assert "RuntimeError: the write failed" in output and "Traceback" in output
    if fmt == "json":
        assert all(json.loads(line)["exc"] for line in output.splitlines())


def test_dramatiq_messages_are_logged_by_actor_and_id_only() -> None:
    logger, buffer = capture()
    message = dramatiq.Message(
        queue_name="q", actor_name="run_command",
        args=({"user_id": 1}, {"command": "Remember", "text": "Tralmirion library"}), kwargs={},
        options={},
    )  # fmt: skip
    # What dramatiq's worker logs at DEBUG for every message it receives.
    logger.debug("Received message %s with id %r.", message, message.message_id)
    entry = json.loads(buffer.getvalue())
    assert "Tralmirion" not in buffer.getvalue()
    assert entry["message"] == (
        f"Received message run_command[{message.message_id}] with id {message.message_id!r}."
    )


def test_exception_text_keeps_ordinary_messages() -> None:
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError:
        text = safe_exception_text(sys.exc_info())
    assert text.startswith("Traceback") and "Connection refused" in text


def test_actor_argument_dumps_are_withheld() -> None:
    logger, buffer = capture()
    # What dramatiq.Actor.__call__ logs at DEBUG before running an actor.
    logger.debug("Received args=%r kwargs=%r.", ("remember", 1, {"text": "Tralmirion"}), {})
    assert "Tralmirion" not in buffer.getvalue()
    assert json.loads(buffer.getvalue())["message"].startswith("Received args=")
