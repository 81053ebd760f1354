"""docker-compose.citus.yml: OwnSona on a Citus cluster, checked without a Docker engine.

Validated against the Compose Specification's schema like docker-compose.yml (and by
``docker-compose config`` where installed); then the mistakes that would leave the
app on a database that is not the coordinator, migrating before the workers are
known, or on an image without pgvector.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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

CITUS = ROOT / "docker-compose.citus.yml"
APP_SERVICES = ("migrate", "web", "worker")
NODES = ("citus-coordinator", "citus-worker1", "citus-worker2")


def _citus() -> dict[str, Any]:
    return yaml.safe_load(CITUS.read_text())


def test_the_citus_file_matches_the_compose_specification() -> None:
    validator = Draft201909Validator(json.loads(SCHEMA.read_text()))
    assert [e.message for e in validator.iter_errors(_citus())] == []


def test_docker_compose_accepts_the_citus_file(tmp_path: Path) -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("neither docker-compose nor `docker compose` is installed")
    shutil.copy(CITUS, tmp_path / "docker-compose.citus.yml")
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    checked = subprocess.run(
        [*command, "-f", "docker-compose.citus.yml", "config", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_app_container_names_the_coordinator() -> None:
    services, dotenv = _citus()["services"], _env_example()
    for name in APP_SERVICES:
        env = _container_env(services[name], dotenv)
        Settings.from_env(env)  # the container's own start-up check passes
        url = urlsplit(env["DATABASE_URL"])
        assert url.hostname == "citus-coordinator" and url.path == "/ownsona", name


def test_the_migration_waits_for_the_workers_to_be_registered() -> None:
    services = _citus()["services"]
    assert services["migrate"]["command"] == ["ownsona", "migrate"]
    assert services["migrate"]["depends_on"]["citus-register"] == {
        "condition": "service_completed_successfully"
    }
    register = services["citus-register"]
    assert {n: {"condition": "service_healthy"} for n in NODES} == register["depends_on"]
    script = (ROOT / "deploy/citus/register-nodes.sh").read_text()
    assert "citus_set_coordinator_host('citus-coordinator', 5432)" in script
    for worker in NODES[1:]:
        assert f"citus_add_node('{worker}', 5432)" in script
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }


def test_every_node_runs_the_official_citus_image_with_pgvector() -> None:
    services = _citus()["services"]
    dockerfile = (ROOT / "deploy/citus/Dockerfile").read_text()
    assert "ARG CITUS_IMAGE=citusdata/citus:" in dockerfile
    assert "postgresql-${PG_MAJOR}-pgvector" in dockerfile
    for name in (*NODES, "citus-register"):
        assert services[name]["image"] == "ownsona-citus:local", name
        assert services[name]["build"] == "./deploy/citus", name
    for name in NODES:
        assert "ports" not in services[name], f"{name} is published: nodes stay internal"


def test_env_example_documents_every_variable_the_citus_file_reads() -> None:
    referenced = {m.group(1) for m in _VARIABLE.finditer(CITUS.read_text()) if m.group(1)}
    assert referenced <= set(_env_example()), referenced - set(_env_example())
    declared = set(_citus()["volumes"])
    used = {
        volume.split(":", 1)[0]
        for service in _citus()["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith("./")
    }
    assert used == declared
