"""bootstrap/: building connects to nothing; opening fails in plain words; no api in workers.

The web process is built up front (``bootstrap.web.WebProcess``) and opened
by the lifespan; a worker or an admin command must start without the web
package.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.web import WebProcess
from config.settings import Settings
from storage.errors import StorageError
from tests.conftest import QUEUE_NAMESPACE
from tests.e2e.server import free_port

REPO = Path(__file__).resolve().parents[2]


async def test_building_the_web_process_connects_to_nothing_and_opening_names_the_database(
    tmp_path: Path,
) -> None:
    dead = f"postgresql://ownsona:secret@127.0.0.1:{free_port()}/x?connect_timeout=1"
    settings = Settings(
        public_url="http://127.0.0.1:8000",
        database_url=dead,
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        data_dir=tmp_path / "data",
        queue_namespace=QUEUE_NAMESPACE,
    )
    web = WebProcess(settings)  # nothing listens at either address: building must not care
    assert web.runtime.deps.pool.closed
    with pytest.raises(StorageError, match="^DATABASE_URL: cannot connect"):
        await web.open()
    await web.close()  # already closed by the failed open: a second close is harmless
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "module",
    [
        "scripts.cli",
        "bootstrap.worker",
        "bootstrap.admin",
        "scripts.reembed",
        "scripts.backup_commands",
        "scripts.relations_commands",
        "scripts.account_commands",
    ],
)
def test_workers_and_commands_do_not_import_the_web_package(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        "web = sorted(m for m in sys.modules if m == 'api' or m.startswith('api.'))\n"
        "assert not web, web\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


async def test_a_provider_gets_an_http_client_only_when_it_talks_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each httpx client costs about 0.1 s to build: start-up builds none it will not use."""
    import httpx

    from bootstrap.providers import embedding_client, extraction_client

    built: list[object] = []
    real_init = httpx.AsyncClient.__init__

    def counting_init(self: httpx.AsyncClient, *args: object, **kwargs: object) -> None:
        built.append(self)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counting_init)
    # The local model, rule-based extraction, an in-process worker: nothing over HTTP.
    local = Settings(data_dir=tmp_path / "data", queue_namespace=QUEUE_NAMESPACE)
    WebProcess(local)
    assert built == [], "a web process on the local model built an HTTP client"
    assert embedding_client(local) is None
    assert extraction_client(local) is None
    remote = Settings(
        embedding_provider="openai",
        embedding_base_url="http://127.0.0.1:9/v1",
        embedding_model="m",
        relation_extractor="llm",
        llm_base_url="http://127.0.0.1:9/v1",
        llm_model="m",
    )
    for client in (embedding_client(remote), extraction_client(remote)):
        assert isinstance(client, httpx.AsyncClient)
        await client.aclose()
