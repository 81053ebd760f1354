"""docker-compose.yml, .env.example and the Dockerfile, checked without a Docker engine.

The compose file is validated against the Compose Specification's JSON
schema (vendored: see compose_spec.NOTICE.md) and, where a ``docker-compose``
or ``docker compose`` is installed, by its own ``config``. The rest are the
mistakes a user would hit on ``docker compose up``: an app container
without DATABASE_URL quietly running the embedded default, a web process
starting before its migration, a variable .env.example never mentions, an
image that runs as root, downloads its model, or runs something other than
the Procfile.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft201909Validator

from config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).with_name("compose_spec.json")
APP_SERVICES = ("migrate", "web", "worker")


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _env_example() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}``, ``${NAME:?error}`` and ``$$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op and op.endswith("?"):
            raise AssertionError(f"docker compose would stop: {name} unset ({arg})")
        return arg or ""

    return _VARIABLE.sub(one, value)


def _container_env(service: dict[str, Any], dotenv: dict[str, str]) -> dict[str, str]:
    """What a container sees: its env_file, then its environment (which wins)."""
    env: dict[str, str] = {}
    env_files = service.get("env_file", [])
    for name in [env_files] if isinstance(env_files, str) else env_files:
        assert name == ".env", f"env_file {name!r}: .env.example documents .env only"
        env.update(dotenv)
    for name, value in (service.get("environment") or {}).items():
        env[name] = _interpolate(str(value), dotenv)
    return env


def _procfile() -> dict[str, str]:
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and re.fullmatch(r"[a-z]+", name):
            entries[name] = command.strip()
    return entries


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    return instructions


def test_the_compose_file_matches_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    Draft201909Validator.check_schema(schema)
    validator = Draft201909Validator(schema)
    compose = _compose()
    assert [e.message for e in validator.iter_errors(compose)] == []
    # The schema does catch the mistakes it is here for.
    broken = copy.deepcopy(compose)
    broken["services"]["web"]["depends_on"]["migrate"]["condition"] = "service_finished"
    broken["services"]["worker"]["healthcheck"]["disabled"] = True
    assert len(list(validator.iter_errors(broken))) == 2


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


def test_docker_compose_accepts_the_file_with_the_example_settings(tmp_path: Path) -> None:
    command = _compose_command()
    if command is None:
        pytest.skip(
            "neither docker-compose nor `docker compose` is installed"
            " (Debian: apt-get install docker-compose)"
        )
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")  # as docs/production.md says
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    checked = subprocess.run(
        [*command, "config", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / ".env").write_text(
        (ROOT / ".env.example").read_text().replace("POSTGRES_PASSWORD=", "#")
    )
    unset = subprocess.run(
        [*command, "config", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unset.returncode != 0 and "POSTGRES_PASSWORD" in unset.stdout + unset.stderr


def test_every_app_container_gets_the_database_and_redis_not_the_embedded_default() -> None:
    compose, dotenv = _compose(), _env_example()
    postgres = compose["services"]["postgres"]["environment"]
    for name in APP_SERVICES:
        env = _container_env(compose["services"][name], dotenv)
        settings = Settings.from_env(env)  # the container's own start-up check
        assert settings.database_url and settings.redis_url, name
        database = urlsplit(settings.database_url)
        assert (database.hostname, database.port, database.path) == (
            "postgres",
            5432,
            "/ownsona",
        ), name
        assert database.username == postgres["POSTGRES_USER"]
        assert database.password == _interpolate(postgres["POSTGRES_PASSWORD"], dotenv)
        assert urlsplit(settings.redis_url).hostname == "redis", name
        assert settings.public_url == dotenv["OWNSONA_PUBLIC_URL"]


def test_web_and_worker_start_after_the_migration_on_healthy_services() -> None:
    services = _compose()["services"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["migrate"]["restart"] == "no"  # one-shot
    for name in ("web", "worker"):
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "redis": {"condition": "service_healthy"},
        }, name
        # Time for in-flight requests and running messages after SIGTERM.
        assert services[name]["stop_grace_period"] == "30s", name
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"], name
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")


def test_the_web_health_check_asks_the_port_the_web_process_listens_on() -> None:
    compose, dotenv = _compose(), _env_example()
    web = compose["services"]["web"]
    port = Settings.from_env(_container_env(web, dotenv)).port
    check = " ".join(web["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/readyz" in check
    [published] = web["ports"]
    host, host_port, container_port = _interpolate(published, dotenv).split(":")
    assert (host, int(container_port)) == (
        "127.0.0.1",
        port,
    )  # only the local reverse proxy reaches it
    assert host_port == dotenv["OWNSONA_PORT"]


def test_data_lives_in_declared_named_volumes() -> None:
    compose = _compose()
    declared = set(compose["volumes"])
    mounts = {
        name: dict(volume.split(":", 1) for volume in service.get("volumes", []))
        for name, service in compose["services"].items()
    }
    assert mounts["postgres"] == {"pgdata": "/var/lib/postgresql/data"}
    assert mounts["redis"] == {"redisdata": "/data"}
    assert (
        "--appendonly" in compose["services"]["redis"]["command"]
    )  # queued writes survive a restart
    used = {source for volumes in mounts.values() for source in volumes}
    assert used == declared


def test_env_example_documents_every_variable_the_compose_file_reads() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    referenced = {m.group(1) for m in _VARIABLE.finditer(text) if m.group(1)}
    dotenv = _env_example()
    assert referenced <= set(dotenv), f"not in .env.example: {referenced - set(dotenv)}"
    assert "cp .env.example .env" in (ROOT / ".env.example").read_text()
    services = _compose()["services"]
    assert all(services[name]["env_file"] == ".env" for name in APP_SERVICES)
    # No variable the compose file sets for the app is shadowed by an empty example value.
    assert all(value for value in dotenv.values()), dotenv


def test_the_containers_run_the_procfile_commands() -> None:
    procfile, services = _procfile(), _compose()["services"]
    assert shlex.join(services["migrate"]["command"]) == procfile["release"]
    assert shlex.join(services["worker"]["command"]) == procfile["worker"]
    assert "command" not in services["web"]  # the image's CMD:
    cmd = [json.loads(args) for keyword, args in _dockerfile() if keyword == "CMD"]
    assert cmd == [["sh", "-c", f"exec {procfile['web']}"]]


def test_the_image_runs_as_a_non_root_user_with_a_health_check() -> None:
    instructions = _dockerfile()
    keywords = [keyword for keyword, _ in instructions]
    assert keywords.count("FROM") == 1
    users = [args for keyword, args in instructions if keyword == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0")
    last_user = len(keywords) - 1 - keywords[::-1].index("USER")
    assert "RUN" not in keywords[last_user:]  # nothing after it runs as root either
    [health] = [args for keyword, args in instructions if keyword == "HEALTHCHECK"]
    assert "/readyz" in health


def test_the_image_has_every_package_and_the_model_and_downloads_nothing_at_run_time() -> None:
    instructions = _dockerfile()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # The wheel takes every package the find patterns name ("memory*": memory and its
    # subpackages); every top-level package of the tree must be among them.
    top_level = {
        pattern.removesuffix("*")
        for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    in_tree = {init.parent.name for init in ROOT.glob("*/__init__.py")} - {"tests"}
    assert in_tree <= top_level, f"pyproject's packages.find leaves out {in_tree - top_level}"
    copied = {args.split()[0] for keyword, args in instructions if keyword == "COPY"}
    assert top_level <= copied, f"the image lacks {top_level - copied}"
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert not (top_level | {"pyproject.toml", "README.md", "Procfile"}) & ignored
    assert {".git", ".venv", ".env", "tests"} <= ignored  # no secrets or bulk in the build context
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    # The build fails unless the bundled model loads, offline.
    assert "LocalEmbedder.bundled()" in runs
    env = " ".join(args for keyword, args in instructions if keyword == "ENV")
    assert "HF_HUB_OFFLINE=1" in env
    start = " ".join(args for keyword, args in instructions if keyword in ("CMD", "ENTRYPOINT"))
    assert not re.search(r"\b(pip|curl|wget|apt-get|hf)\b", start)


def test_the_bundled_model_loads_and_embeds_with_no_network(tmp_path: Path) -> None:
    """What the image's build step checks: the model comes from the installed packages."""
    dead = "http://127.0.0.1:9"  # the discard port: any download attempt fails at once
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "ALL_PROXY": dead,
        "NO_PROXY": "",
        "HOME": str(tmp_path),  # no model cache of ours to fall back on
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    script = (
        "import asyncio\n"
        "from memory.providers.embedders import LocalEmbedder\n"
        "async def main():\n"
        "    e = LocalEmbedder.bundled()\n"
        "    print(await e.ensure_ready(), len(await e.embed_one('my sister lives in Porto')))\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["384", "384"]
