"""``ownsona stdio``: the web process's collaborators, serving one user on stdin/stdout.

For MCP clients that only launch local commands (Claude Desktop's local
configuration, editors). The process is a :class:`~bootstrap.web.WebProcess`
without HTTP: the same store (the embedded cluster in ``OWNSONA_DATA_DIR``,
or ``DATABASE_URL``; migrated as ``ownsona serve`` does), the same write
queue (the in-process worker, or with ``REDIS_URL`` Redis and a separate
``ownsona worker``), the same tools and use cases, and
:class:`api.mcp.stdio.StdioServer` in front of the dispatcher instead of
the Falcon app.

Standard output carries MCP messages only: :func:`claim_stdout` keeps the
real one for them and points file descriptor 1 at stderr, so a stray
``print``, a library's progress bar, or a child process (the embedded
PostgreSQL's ``pg_ctl``) cannot corrupt the stream. Logs go to stderr.
End of input ends the session (the spec's shutdown signal); so do SIGTERM
and SIGINT. The exit status is 0 after a clean shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from typing import BinaryIO

from api.mcp.dispatch import McpDispatcher
from api.mcp.stdio import OutputClosed, StdioServer, WriteLine
from api.mcp.tools import tool_specs
from auth.accounts import DEFAULT_USERNAME, find_account
from auth.errors import AccountError
from config.settings import Settings

from .serve import fast_event_loop
from .web import WebProcess

_log = logging.getLogger("ownsona.stdio")

#: Bytes read from standard input at a time.
READ_CHUNK_BYTES = 64 * 1024


def claim_stdout() -> BinaryIO:
    """The process's standard output, for MCP messages only; fd 1 then points at stderr.

    The duplicate is not inherited by child processes (PEP 446), so only this
    process writes to it, and the client sees end of file when it exits.
    """
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return out


def login_username(settings: Settings) -> str:
    """The account ``--user`` defaults to: OWNSONA_LOGIN_USERNAME, else the first-start account."""
    return settings.login_username or DEFAULT_USERNAME


def run_stdio(settings: Settings, username: str | None, out: BinaryIO) -> int:
    """Serve MCP on stdin and ``out`` until end of input or a signal; the exit status."""
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        runner.run(serve_stdio(settings, username, out))
    return 0


async def serve_stdio(settings: Settings, username: str | None, out: BinaryIO) -> None:
    """Open the process's collaborators, serve ``username`` (default the login account), close."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows: EOF only
            loop.add_signal_handler(sig, stop.set)
    process = WebProcess(settings, kind="stdio")
    await process.open()
    try:
        if process.notices:
            # Never the generated password: a local client may keep stderr in a log file.
            _log.warning(
                "created the login account with a generated password; set one with "
                "`ownsona user passwd %s`",
                login_username(settings),
            )
        user_id = await _active_account(process, username or login_username(settings))
        runtime = process.runtime
        dispatcher = McpDispatcher(
            tool_specs(settings),
            runtime.run_inline,
            deps=runtime.deps,
            write_queue=runtime.write_queue,
            audit=runtime.audit,
        )
        server = StdioServer(
            dispatcher,
            user_id=user_id,
            max_line_bytes=settings.max_body_bytes,
            max_batch=settings.max_batch_size,
        )
        queue = (
            "Redis (REDIS_SENTINELS)"
            if settings.redis_sentinel
            else "Redis (REDIS_URL)"
            if settings.redis_url
            else "in-process worker"
        )
        _log.info("serving MCP on stdio for user id %s; queue: %s", user_id, queue)
        reader = _StdinReader(sys.stdin.fileno(), loop)
        await server.serve(reader.read, _line_writer(out), stop)
        _log.info("stdio session ended")
    finally:
        await process.close()


async def _active_account(process: WebProcess, username: str) -> int:
    """The id of ``username``; :class:`AccountError` when it is unknown or disabled."""
    async with process.runtime.deps.pool.connection() as conn:
        row = await find_account(conn, username)
    if row.disabled:
        raise AccountError(
            "account_disabled",
            f"The account {row.username!r} is disabled; enable it with "
            f"`ownsona user enable {row.username}`.",
        )
    return row.id


def _line_writer(out: BinaryIO) -> WriteLine:
    def write(data: bytes) -> None:
        try:
            out.write(data)
            out.flush()
        except (BrokenPipeError, ValueError, OSError) as ex:  # ValueError: closed file
            raise OutputClosed from ex

    return write


class _StdinReader:
    """Standard input read on a daemon thread (pipes, files and terminals alike, any OS).

    The thread hands each chunk to the event loop through a small queue and
    blocks while it is full, so input is read no faster than it is handled.
    Being a daemon, a thread blocked in ``read`` does not hold up the exit.
    """

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue(maxsize=4)
        threading.Thread(target=self._pump, name="ownsona-stdin", daemon=True).start()

    async def read(self) -> bytes:
        return await self._chunks.get()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, READ_CHUNK_BYTES)
            except OSError:
                chunk = b""
            try:
                asyncio.run_coroutine_threadsafe(self._chunks.put(chunk), self._loop).result()
            except RuntimeError:  # the loop has closed: the process is ending
                return
            if not chunk:
                return
