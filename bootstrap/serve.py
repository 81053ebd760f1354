"""``ownsona serve``: uvicorn over the web process, with a shutdown that always ends.

The web process is opened before uvicorn starts (a start-up failure is the
command's error, with its exit status), served, then closed. Stopping is
bounded (:class:`GracefulServer`): the first SIGINT or SIGTERM lets uvicorn
drain the requests for SHUTDOWN_TIMEOUT, then the web process is closed;
whatever still runs SHUTDOWN_TIMEOUT + ``CLOSE_GRACE_S`` after the signal
is abandoned by exiting the process. A second Ctrl-C exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import uvicorn

from api.app import create_app
from config.settings import Settings

from .web import CLOSE_GRACE_S, WebProcess

#: Exit code of a process stopped by a second Ctrl-C (the shell's code for SIGINT).
INTERRUPTED_EXIT_CODE = 130
#: Exit code when the shutdown deadline passed with something still running.
DEADLINE_EXIT_CODE = 1


def fast_event_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency off Windows), else asyncio's.

    uvicorn's usual production pairing, with httptools (which uvicorn picks up
    by itself); the Procfile's plain ``uvicorn`` gets the same pair.
    """
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def serve(settings: Settings, *, announce: Callable[[Sequence[str]], None]) -> None:
    """Open the web process, serve it until stopped, close it.

    ``announce`` is called with the start-up notices once everything is open,
    just before uvicorn starts listening.
    """
    web = WebProcess(settings)
    await web.open()
    try:
        # Opened above, closed below: the app's lifespan has nothing to do.
        app = create_app(settings, runtime=web.runtime)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            lifespan="on",
            log_level="warning",
            # Our logging (bootstrap.logs) stays in charge; RequestLog writes the access lines.
            log_config=None,
            access_log=False,
            # X-Forwarded-For/-Proto only from the proxies FORWARDED_ALLOW_IPS names: a client
            # could otherwise pick the address the sign-in throttle counts against.
            proxy_headers=bool(settings.forwarded_allow_ips),
            forwarded_allow_ips=list(settings.forwarded_allow_ips) or None,
            # SIGTERM: stop accepting, let in-flight requests (and the writes they
            # await) finish for up to SHUTDOWN_TIMEOUT, then close the web process below.
            timeout_graceful_shutdown=settings.shutdown_timeout_s,
        )
        server = GracefulServer(config, shutdown_timeout_s=settings.shutdown_timeout_s)
        announce(web.notices)
        await server.serve()
    finally:
        await web.close()


class GracefulServer(uvicorn.Server):
    """uvicorn's server with a shutdown that always ends, for ``ownsona serve``.

    uvicorn alone re-raises the stopping signal once it has drained: with
    SIGINT that cancelled closing the web process at its first await, so the
    in-process worker was never stopped and its (non-daemon) event loop
    thread kept the interpreter alive for good. Here:

    - the signal is not re-raised, and our handlers stay installed until
      the process ends, so the web process is always closed;
    - the first signal arms a watchdog that exits the process (code 1)
      ``shutdown_timeout_s + CLOSE_GRACE_S`` later, whatever still runs;
    - a second SIGINT (Ctrl-C twice) exits at once with code 130, without
      a traceback. A second SIGTERM changes nothing: platforms may signal
      every process of a group, and one stop is enough.

    Exiting early never loses an acknowledged write: a request is answered
    only once its write has committed, and an unanswered request's write
    either committed (a retry with its idempotency key returns that answer)
    or rolls back with the connection.
    """

    def __init__(self, config: uvicorn.Config, *, shutdown_timeout_s: float) -> None:
        super().__init__(config)
        self._deadline_s = shutdown_timeout_s + CLOSE_GRACE_S
        self._stopping = False

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle_exit)
        yield  # not restored: the process ends after closing, and a signal must not cancel that

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self._stopping:
            self._stopping = True
            self.should_exit = True
            watchdog = threading.Timer(
                self._deadline_s, _exit_after_deadline, args=(self._deadline_s,)
            )
            watchdog.daemon = True
            watchdog.start()
        elif sig == signal.SIGINT:
            _exit_now("interrupted again; exiting without waiting", INTERRUPTED_EXIT_CODE)


def _exit_after_deadline(deadline_s: float) -> None:
    _exit_now(f"shutdown did not finish within {deadline_s:g} s; exiting", DEADLINE_EXIT_CODE)


def _exit_now(message: str, code: int) -> None:
    # os._exit: no interpreter shutdown, which would wait for the worker's threads.
    try:
        sys.stderr.write(f"ownsona: {message}\n")
        sys.stderr.flush()
    finally:
        os._exit(code)
