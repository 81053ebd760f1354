"""docker-compose.ha.yml: the drill's topology in containers, checked without a Docker engine.

Validated against the Compose Specification's schema like docker-compose.yml
(and by ``docker-compose config`` where installed); then the mistakes that would
leave a single point of failure or stop the failover from working: an app
container naming only one database node, or not asking for the writable one;
a primary that does not wait for its standby; Sentinels that watch another
master name than the app asks for; a standby that is not a base backup.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from jsonschema import Draft201909Validator

from config.settings import Settings
from tests.ops.test_compose import (
    _VARIABLE,
    ROOT,
    SCHEMA,
    _compose_command,
    _container_env,
    _env_example,
)

HA = ROOT / "docker-compose.ha.yml"
APP_SERVICES = ("migrate", "web1", "web2", "worker1", "worker2")


def _ha() -> dict[str, Any]:
    return yaml.safe_load(HA.read_text())


def test_the_ha_file_matches_the_compose_specification() -> None:
    validator = Draft201909Validator(json.loads(SCHEMA.read_text()))
    assert [e.message for e in validator.iter_errors(_ha())] == []


def test_docker_compose_accepts_the_ha_file(tmp_path: Path) -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("neither docker-compose nor `docker compose` is installed")
    shutil.copy(HA, tmp_path / "docker-compose.ha.yml")
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    checked = subprocess.run(
        [*command, "-f", "docker-compose.ha.yml", "config", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_app_container_names_both_database_nodes_and_the_sentinels() -> None:
    services, dotenv = _ha()["services"], _env_example()
    sentinels = sorted(name for name in services if name.startswith("sentinel"))
    assert len(sentinels) == 3
    for name in APP_SERVICES:
        env = _container_env(services[name], dotenv)
        Settings.from_env(env)  # the container's own start-up check passes
        query = parse_qs(urlsplit(env["DATABASE_URL"]).query)
        assert query["host"] == ["postgres-primary,postgres-standby"], name
        assert query["target_session_attrs"] == ["read-write"], name
        replicas = urlsplit(env["DATABASE_REPLICA_URLS"])
        assert replicas.netloc.endswith("@postgres-primary:5432,postgres-standby:5432"), name
        assert parse_qs(replicas.query)["target_session_attrs"] == ["standby"], name
        assert env["REDIS_SENTINELS"] == ",".join(f"{s}:26379" for s in sentinels), name
        for sentinel in sentinels:
            config = services[sentinel]["command"][2]
            assert f"sentinel monitor {env['REDIS_SENTINEL_MASTER']} redis-master 6379 2" in config


def test_the_primary_waits_for_the_standby_it_is_backed_up_to() -> None:
    services = _ha()["services"]
    command = " ".join(services["postgres-primary"]["command"])
    assert "synchronous_standby_names=standby" in command
    assert "synchronous_commit=on" in command
    standby = (ROOT / "deploy/ha/standby-entrypoint.sh").read_text()
    assert "pg_basebackup" in standby and "application_name=standby" in standby
    assert services["postgres-standby"]["image"] == services["postgres-primary"]["image"]
    assert services["postgres-primary"]["image"].startswith("pgvector/pgvector:")
    assert "--replicaof" in services["redis-replica"]["command"]


def test_two_web_processes_on_two_ports_and_two_workers() -> None:
    services, dotenv = _ha()["services"], _env_example()
    published = set()
    for name in ("web1", "web2"):
        port = Settings.from_env(_container_env(services[name], dotenv)).port
        assert f"http://127.0.0.1:{port}/readyz" in " ".join(services[name]["healthcheck"]["test"])
        [mapping] = services[name]["ports"]
        published.add(mapping.split(":")[1])
    assert len(published) == 2
    for name in ("worker1", "worker2"):
        assert services[name]["command"] == ["ownsona", "worker"]


def test_env_example_documents_every_variable_the_ha_file_reads() -> None:
    referenced = {m.group(1) for m in _VARIABLE.finditer(HA.read_text()) if m.group(1)}
    assert referenced <= set(_env_example()), referenced - set(_env_example())
    declared = set(_ha()["volumes"])
    used = {
        volume.split(":", 1)[0]
        for service in _ha()["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith("./")
    }
    assert used == declared
