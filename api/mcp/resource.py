"""``/mcp``: the MCP Streamable HTTP transport, JSON responses only.

MCP Streamable HTTP (2026-07-28 beside 2025-03-26, 2025-06-18, 2025-11-25)
as SUPPLEMENT §7 narrows it; what differs between revisions is in
``versions.py``, read here through one ``ProtocolRules``:

- POST carries JSON-RPC. Requests are answered ``application/json`` (no
  SSE: nothing we do streams), notifications and client responses ``202``.
  The ``Accept`` header is not enforced: some proxies send only
  ``text/event-stream`` and still read a JSON answer.
- Checks run in this order: Origin (403), bearer token (401: a request
  without credentials learns nothing else, whatever its body), Content-Type
  (415), body size (413), JSON-RPC envelope (400), the protocol version
  (400: -32022 for an ``MCP-Protocol-Version`` we lack; -32020
  HeaderMismatch when the body's ``_meta`` names a version and the header
  is missing or says another, and, at 2026-07-28, when ``Mcp-Method`` or
  ``Mcp-Name`` is missing, malformed or differs from the body), the token's
  scope for each tool called (403 ``insufficient_scope`` with the missing
  scope in ``WWW-Authenticate``, so a client can step up; a batch is
  refused whole), then the method.
- The version of a request: the ``MCP-Protocol-Version`` header, which must
  equal the body's ``_meta`` version when there is one; no header and no
  ``_meta`` version is served as 2025-03-26 (as before).
- 2026-07-28 is stateless: no ``initialize``, no ``Mcp-Session-Id`` issued,
  checked or used (a stray one is ignored), DELETE answers 405. A JSON-RPC
  error goes out with the status the revision names: 404 for -32601, 400
  for -32602, -32600, -32020, -32022.
- Sessions (2025-11-25 and older) without session state: ``initialize`` hands out an
  ``Mcp-Session-Id`` signed for its user (``kid.issued.nonce.mac``, the MAC
  keyed by the shared signing key, so every web process recognises it). A request
  (other than ``initialize``) whose session id is not one we issued to its
  user, or that was ended with DELETE, answers 404 (Streamable HTTP,
  "Session Management": the client then starts over with ``initialize``).
  DELETE ends a session (204; 404 when unknown or already ended). Ended
  sessions are recorded in PostgreSQL, so no web process accepts them again,
  before or after a restart: one primary-key lookup per request that carries
  a session id (``auth.mcp_sessions``). An id is accepted for
  ``SESSION_LIFETIME_S`` (30 days) after its ``initialize``, then answers 404
  too; ended ones are kept that long.
  A database failure in that lookup is answered as one in the bearer check
  (below). A request without a session id is served as before
  (older and sessionless clients).
- Writes are done at most once per idempotency key (``dispatch.idempotency_key``:
  the ``Idempotency-Key`` header, ``_meta["io.ownsona/idempotencyKey"]``, or
  the retry window over user + tool + arguments).
- A database failure during the bearer check (PostgreSQL down) answers a
  ``tools/call`` with a DATABASE_ERROR tool result (HTTP 200); other
  requests get a JSON-RPC internal error with 503 and ``Retry-After``.
- A string with a lone surrogate (JSON's ``"\\ud800"``, not Unicode text)
  is no request id (-32600, id null); in a tool's arguments it is an
  INVALID_INPUT tool result; echoed elsewhere (a method name) it is sent
  back as U+FFFD, so every reply is UTF-8 a strict JSON parser reads.
- GET answers 405 in every revision: we offer no server-to-client stream
  (2026-07-28 removed it; ``subscriptions/listen`` is not offered either,
  the tool list never changes while a server runs).
- Batches (JSON arrays) exist only in 2025-03-26 (2025-06-18 removed them):
  served when the request names no version or 2025-03-26, refused with
  -32600 otherwise.
- No body ever produces an HTTP 500: anything unexpected becomes a
  JSON-RPC internal error, or an INTERNAL_ERROR tool result inside a tool.
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi
from psycopg_pool import AsyncConnectionPool

from api.errors import (
    HttpReply,
    bearer_reply,
    database_payload,
    internal_jsonrpc_error,
    is_database_failure,
    jsonrpc_error_reply,
    logger,
)
from api.http_reply import send
from api.mcp import jsonrpc, versions
from api.mcp.dispatch import CallContext, McpDispatcher, server_info, tool_result
from api.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    SESSION_NOT_FOUND,
    Invalid,
    JsonRpcError,
    Message,
)
from api.origins import OriginPolicy, preflight_headers
from api.tracing import bearer_span
from auth.bearer import BearerValidator
from auth.errors import BearerError
from auth.keys import KeyStore
from auth.mcp_sessions import SessionBook
from auth.tokens import Principal
from config.settings import Settings

#: The methods /mcp implements (RFC 9110 §10.2.1 Allow).
ALLOW = "POST, DELETE, OPTIONS"
#: The bearer check could not reach the database: answered per message, see _database_down.
_DATABASE_DOWN = object()
_DATABASE_DOWN_MESSAGE = "The database is unavailable; nothing was changed. Try again shortly."


class McpResource:
    """The MCP endpoint."""

    def __init__(
        self,
        dispatcher: McpDispatcher,
        origins: OriginPolicy,
        *,
        settings: Settings,
        bearer: BearerValidator,
        keystore: KeyStore,
        pool: AsyncConnectionPool,
        sessions: SessionBook,
        max_body_bytes: int,
        max_batch: int,
    ) -> None:
        self._dispatcher = dispatcher
        self._origins = origins
        self._settings = settings
        self._bearer = bearer
        self._keystore = keystore
        self._pool = pool
        self._sessions = sessions
        self._max_body = max_body_bytes
        self._max_batch = max_batch

    async def on_options(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        """CORS preflight: never needs a token (browsers send none with it)."""
        origin = req.get_header("Origin")
        if not self._origins.allows(origin):
            _send(resp, _forbidden_origin())
            return
        headers = {"Allow": ALLOW}
        if origin is not None:
            headers.update(preflight_headers(origin))
        _send(resp, HttpReply(204, None, headers))

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        # Streamable HTTP, "Listening for Messages from the Server": a server
        # that offers no SSE stream MUST answer GET with 405.
        if not self._origins.allows(req.get_header("Origin")):
            _send(resp, _forbidden_origin())
            return
        message = "Method Not Allowed: POST JSON-RPC messages here; no SSE stream is offered."
        _send(resp, _refuse(405, message, headers={"Allow": ALLOW}))

    # The same answer, with the same Allow, for the other methods.
    on_head = on_put = on_patch = on_get

    async def on_delete(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        """Session termination: later requests with this session id answer 404."""
        guarded = await self._guard(req)
        session_id = _field(req, "Mcp-Session-Id")
        if isinstance(guarded, HttpReply):
            _send(resp, guarded)
        elif _sessionless(_field(req, "MCP-Protocol-Version")):
            # Streamable HTTP 2026-07-28, "Backward Compatibility": no sessions, DELETE is 405.
            message = "Method Not Allowed: this protocol version has no sessions to end."
            _send(resp, _refuse(405, message, headers={"Allow": ALLOW}))
        elif not isinstance(guarded, Principal):
            _send(resp, _database_unavailable())
        elif not session_id:
            _send(resp, _refuse(400, "Bad Request: DELETE needs an Mcp-Session-Id header."))
        elif not self._sessions.is_ours(self._keystore, guarded.user_id, session_id):
            _send(resp, _session_not_found(None))
        else:
            try:
                ended = await self._sessions.end(self._pool, session_id, guarded.user_id)
            except Exception as ex:
                if not is_database_failure(ex):
                    raise
                logger.error("session end: database failure %s", type(ex).__name__)
                _send(resp, _database_unavailable())
                return
            _send(resp, HttpReply(204) if ended else _session_not_found(None))

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        try:
            reply = await self._post(req)
        except Exception as ex:
            reply = jsonrpc_error_reply(200, internal_jsonrpc_error(ex))
        _send(resp, reply)

    async def _post(self, req: falcon.asgi.Request) -> HttpReply:
        guarded = await self._guard(req)
        if isinstance(guarded, HttpReply):
            return guarded
        if not _is_json(req.content_type):
            return _refuse(415, "Unsupported Media Type: send Content-Type: application/json.")
        try:
            body = await self._read_body(req)
            if body is None:
                return _refuse(413, f"Request body too large: at most {self._max_body} bytes.")
            parsed = jsonrpc.parse_body(body)
        except JsonRpcError as ex:
            return jsonrpc_error_reply(400, ex)
        if isinstance(parsed, Invalid):
            return jsonrpc_error_reply(400, parsed.error, parsed.id)

        try:
            version = self._version(req, parsed)
        except JsonRpcError as ex:
            # Streamable HTTP, "Protocol Version Header": an unsupported version MUST
            # get 400, and so does a header that disagrees with the body (-32020).
            return jsonrpc_error_reply(400, ex, _request_id(parsed))
        rules = versions.rules_for(version)

        if not isinstance(guarded, Principal):
            return _database_down(parsed, self._dispatcher, rules)
        # 2026-07-28 has no sessions: a stray Mcp-Session-Id is ignored, never checked or used.
        session_id = _field(req, "Mcp-Session-Id") if rules.sessions else None
        apps = False
        if session_id is not None and not _is_initialize(parsed):
            state = await self._session_open(guarded, session_id)
            if state is _DATABASE_DOWN:
                return _database_down(parsed, self._dispatcher, rules)
            if not state:
                return _session_not_found(_request_id(parsed))
            apps = self._sessions.has_apps(session_id)

        refused = self._scope_refusal(guarded, parsed if isinstance(parsed, list) else [parsed])
        if refused is not None:
            return refused

        ctx = CallContext(
            user_id=guarded.user_id,
            session_id=session_id,
            idempotency_header=_field(req, "Idempotency-Key"),
            protocol_version=version,
            client_id=guarded.client_id,
            token_jti=guarded.jti,
            apps=apps,
        )
        if isinstance(parsed, list):
            return await self._batch(parsed, ctx, rules)
        if parsed.kind != "request":
            # Notifications and client responses: accepted, nothing to answer.
            return HttpReply(202)
        outcome = await self._dispatcher.handle(parsed, ctx)
        headers: dict[str, str] = {}
        if outcome.opens_session and rules.sessions:
            headers["Mcp-Session-Id"] = self._sessions.open(
                self._keystore, guarded.user_id, apps=outcome.apps
            )
        status = 200
        error = outcome.response.get("error")
        if isinstance(error, dict):
            # The rules the dispatcher served by; the header's when it refused the version.
            status = (outcome.rules or rules).http_status(error["code"])
        return HttpReply(status, outcome.response, headers)

    @staticmethod
    def _version(req: falcon.asgi.Request, parsed: Message | list[Message | Invalid]) -> str | None:
        """The request's protocol version; raises -32022 / -32020 (see ``versions``)."""
        header = _field(req, "MCP-Protocol-Version")
        if isinstance(parsed, list):
            if header is not None:
                versions.rules_for(header)
            return header
        version = versions.http_version(header, parsed)
        versions.check_http_headers(
            versions.rules_for(version),
            parsed,
            _field(req, "Mcp-Method"),
            _field(req, "Mcp-Name"),
        )
        return version

    async def _session_open(self, principal: Principal, session_id: str) -> bool | object:
        """Ours, for this user, not expired and not ended; ``_DATABASE_DOWN`` when the check failed.

        The database failing here is answered as in the bearer check (a tool
        call gets DATABASE_ERROR): an ended session must not pass for open.
        """
        if not self._sessions.is_ours(self._keystore, principal.user_id, session_id):
            return False
        try:
            return not await self._sessions.is_ended(self._pool, session_id)
        except Exception as ex:
            if not is_database_failure(ex):
                raise
            logger.error("session check: database failure %s", type(ex).__name__)
            return _DATABASE_DOWN

    async def _batch(
        self, items: list[Message | Invalid], ctx: CallContext, rules: versions.ProtocolRules
    ) -> HttpReply:
        if not rules.batches:
            return _refuse(
                400, f"Invalid Request: protocol version {rules.version} has no batches."
            )
        if len(items) > self._max_batch:
            return _refuse(400, f"Invalid Request: at most {self._max_batch} messages per batch.")
        responses: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, Invalid):
                responses.append(jsonrpc.error(item.id, item.error))
            elif item.kind != "request":
                continue
            elif versions.meta_version(item.params) is not None:
                # A request naming its version in _meta is a 2026-07-28 one, which needs
                # the method headers a batch cannot carry and has no batches.
                message = (
                    "Invalid Request: a request naming its version in _meta cannot be batched."
                )
                responses.append(jsonrpc.error(item.id, JsonRpcError(INVALID_REQUEST, message)))
            elif item.method == "initialize":
                # 2025-03-26, Lifecycle: initialize MUST NOT be part of a batch.
                message = "Invalid Request: initialize cannot be batched."
                responses.append(jsonrpc.error(item.id, JsonRpcError(INVALID_REQUEST, message)))
            else:
                responses.append((await self._dispatcher.handle(item, ctx)).response)
        return HttpReply(200, responses) if responses else HttpReply(202)

    def _scope_refusal(
        self, principal: Principal, items: list[Message | Invalid]
    ) -> HttpReply | None:
        """403 ``insufficient_scope`` when a tool called needs a scope the token lacks."""
        for item in items:
            if not isinstance(item, Message):
                continue
            scope = self._dispatcher.required_scope(item)
            if scope is None:
                continue
            try:
                self._bearer.require_scope(principal, scope)
            except BearerError as ex:
                return bearer_reply(self._settings, ex)
        return None

    async def _guard(self, req: falcon.asgi.Request) -> Principal | HttpReply | object:
        """Origin, then the bearer token: the principal, or the refusal to send.

        ``_DATABASE_DOWN`` when the database failed the check: the caller
        answers each message (a tool call gets a DATABASE_ERROR result).
        """
        if not self._origins.allows(req.get_header("Origin")):
            return _forbidden_origin()
        try:
            with bearer_span():
                principal: Principal = await self._bearer.validate(req.get_header("Authorization"))
        except BearerError as ex:
            return bearer_reply(self._settings, ex, req.get_header("Host"))
        except Exception as ex:
            if is_database_failure(ex):
                # The type only: a driver message may quote a statement's parameters.
                logger.error("bearer check: database failure %s", type(ex).__name__)
                return _DATABASE_DOWN
            # The check itself failed in another way: not the client's fault.
            err = internal_jsonrpc_error(ex)
            return jsonrpc_error_reply(503, err, headers={"Retry-After": "5"})
        return principal

    async def _read_body(self, req: falcon.asgi.Request) -> bytes | None:
        """The body, or None when it exceeds the cap; never reads more than cap + one chunk."""
        try:
            declared = req.content_length
        except falcon.HTTPInvalidHeader as ex:
            raise JsonRpcError(INVALID_REQUEST, "Bad Request: invalid Content-Length.") from ex
        if declared is not None and declared > self._max_body:
            return None
        chunks: list[bytes] = []
        total = 0
        async for chunk in req.stream:
            total += len(chunk)
            if total > self._max_body:
                return None
            chunks.append(chunk)
        return b"".join(chunks)


def _is_json(content_type: str | None) -> bool:
    # Parameters such as "; charset=utf-8" are allowed.
    if content_type is None:
        return False
    return content_type.split(";")[0].strip().lower() == "application/json"


def _refuse(status: int, message: str, *, headers: dict[str, str] | None = None) -> HttpReply:
    """An HTTP-level refusal, with a JSON-RPC Invalid Request body (id null)."""
    return jsonrpc_error_reply(status, JsonRpcError(INVALID_REQUEST, message), headers=headers)


def _forbidden_origin() -> HttpReply:
    # Streamable HTTP, "Security Warning": an invalid Origin MUST get 403; the
    # body MAY be a JSON-RPC error without an id.
    return _refuse(403, "Forbidden: this Origin is not allowed.")


def _sessionless(version: str | None) -> bool:
    """Whether a request's version header names a revision without sessions."""
    if version not in versions.SUPPORTED_VERSIONS:
        return False
    return not versions.rules_for(version).sessions


def _is_initialize(parsed: Message | Invalid | list[Message | Invalid]) -> bool:
    # Streamable HTTP, "Session Management": a client whose session is gone
    # starts a new one with initialize, which may still carry the old id.
    return isinstance(parsed, Message) and parsed.method == "initialize"


def _request_id(parsed: Message | Invalid | list[Message | Invalid]) -> jsonrpc.RequestId | None:
    if isinstance(parsed, Message) and parsed.kind == "request":
        return parsed.id
    return None


def _session_not_found(request_id: jsonrpc.RequestId | None) -> HttpReply:
    message = "Session not found: it ended or was never opened here; send initialize again."
    return jsonrpc_error_reply(404, JsonRpcError(SESSION_NOT_FOUND, message), request_id)


def _database_unavailable(request_id: jsonrpc.RequestId | None = None) -> HttpReply:
    err = JsonRpcError(INTERNAL_ERROR, _DATABASE_DOWN_MESSAGE)
    return jsonrpc_error_reply(503, err, request_id, headers={"Retry-After": "5"})


def _database_down(
    parsed: Message | Invalid | list[Message | Invalid],
    dispatcher: McpDispatcher,
    rules: versions.ProtocolRules,
) -> HttpReply:
    """The answer when the database failed the bearer check.

    A ``tools/call`` of a known tool is a tool error (DATABASE_ERROR, nothing
    was done), which the model can act on; any other message has nothing
    useful to say but "unavailable" (503). In a batch, each element gets its
    own answer.
    """

    def answer(item: Message | Invalid) -> dict[str, Any] | None:
        if isinstance(item, Invalid):
            return jsonrpc.error(item.id, item.error)
        if item.kind != "request":
            return None
        if dispatcher.required_scope(item) is not None:  # a tools/call of a known tool
            refusal = rules.decorate(_tool_refusal(item, database_payload()), server_info())
            return jsonrpc.result(item.id, refusal)
        return jsonrpc.error(item.id, JsonRpcError(INTERNAL_ERROR, _DATABASE_DOWN_MESSAGE))

    if isinstance(parsed, Message) and dispatcher.required_scope(parsed) is None:
        return _database_unavailable(_request_id(parsed))
    if not isinstance(parsed, list):
        return HttpReply(200, answer(parsed))
    responses = [r for r in (answer(item) for item in parsed) if r is not None]
    return HttpReply(200, responses) if responses else _database_unavailable()


def _tool_refusal(message: Message, payload: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(message.params, dict)
    return tool_result(payload, tool=str(message.params.get("name")), user_id=0)


def _field(req: falcon.asgi.Request, name: str) -> str | None:
    """A request header's value without the whitespace around it, which is not part of it
    (RFC 9110 §5.5): uvicorn's parser leaves trailing whitespace in place."""
    value = req.get_header(name)
    return None if value is None else value.strip(" \t")


def _send(resp: falcon.asgi.Response, reply: HttpReply) -> None:
    try:
        send(resp, reply, encode=jsonrpc.encode)
    except Exception as ex:
        # Say, a non-finite float in a result: still a JSON-RPC answer, never a 500.
        fallback = jsonrpc.error(None, internal_jsonrpc_error(ex))
        send(resp, HttpReply(200, fallback, reply.headers), encode=jsonrpc.encode)
