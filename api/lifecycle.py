"""Transitional: the web process's building moved to ``bootstrap.web``.

Kept only for callers not yet moved (``tests/ops/test_reembed.py``); delete
it once they import ``bootstrap.web``. It imports bootstrap lazily, so
importing ``api`` never does.
"""

from __future__ import annotations

from typing import Any

from config.settings import Settings


async def build_runtime(settings: Settings, *, in_process_worker: bool | None = None) -> Any:
    """An opened ``bootstrap.web.WebProcess``; it has ``deps`` and ``write_queue`` as a Runtime has."""
    from bootstrap.web import WebProcess

    web = WebProcess(settings, in_process_worker=in_process_worker)
    await web.open()
    return _Opened(web)


async def close_runtime(runtime: Any) -> None:
    await runtime.web.close()


class _Opened:
    def __init__(self, web: Any) -> None:
        self.web = web
        self.deps = web.runtime.deps
        self.write_queue = web.runtime.write_queue
