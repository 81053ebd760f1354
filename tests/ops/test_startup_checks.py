"""Start-up checks: every bad setting stops start-up with a message naming its variable.

The unit tests call ``Settings.from_env`` with a dictionary; the process tests
run ``ownsona serve`` and check its exit code, its message, and that it
started nothing (no data directory) before refusing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from config.settings import Settings, SettingsError, is_loopback_host, public_listen_problem
from tests.e2e.server import free_port
from tests.ops.lifecycle_helpers import base_env

PASSWORD = "correct horse battery"


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    return {"OWNSONA_DATA_DIR": str(tmp_path / "data"), **values}


def _refused(tmp_path: Path, **values: str) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(_env(tmp_path, **values))
    return caught.value


# -- the settings rules ------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["http://0.0.0.0", "0.0.0.0:8000", "my host", "-bad.example", "a..b"]
)
def test_a_listen_address_that_is_not_one_is_refused(tmp_path, host):
    error = _refused(tmp_path, OWNSONA_HOST=host)
    assert error.variable == "OWNSONA_HOST"
    assert repr(host) in str(error)


@pytest.mark.parametrize(
    ("host", "stored"),
    [
        ("0.0.0.0", "0.0.0.0"),
        ("::", "::"),
        ("[::1]", "::1"),
        ("localhost", "localhost"),
        ("my-box.lan", "my-box.lan"),
        ("192.168.1.20", "192.168.1.20"),
    ],
)
def test_addresses_and_host_names_are_accepted(tmp_path, host, stored):
    assert Settings.from_env(_env(tmp_path, OWNSONA_HOST=host)).host == stored


def test_a_data_dir_that_cannot_be_a_directory_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    error = _refused(tmp_path, OWNSONA_DATA_DIR=str(blocker / "ownsona"))
    assert error.variable == "OWNSONA_DATA_DIR"
    assert "not a directory" in str(error)
    # A DATABASE_URL makes the data directory irrelevant.
    settings = Settings.from_env(
        {"OWNSONA_DATA_DIR": str(blocker / "ownsona"), "DATABASE_URL": "postgres://db/ownsona"}
    )
    assert settings.database_url == "postgres://db/ownsona"


def test_a_data_dir_that_cannot_be_created_is_refused(tmp_path):
    # Holds for root too: nothing can make a directory inside a regular file.
    (tmp_path / "a-file").write_text("not a directory")
    error = _refused(tmp_path, OWNSONA_DATA_DIR=str(tmp_path / "a-file" / "ownsona"))
    assert error.variable == "OWNSONA_DATA_DIR" and "is not a directory" in str(error)
    with_database = {
        **_env(tmp_path),
        "OWNSONA_DATA_DIR": str(tmp_path / "a-file" / "ownsona"),
        "DATABASE_URL": "postgres://db/ownsona",
    }
    # With DATABASE_URL the embedded cluster is never started, so the directory is not checked.
    assert Settings.from_env(with_database).database_url == "postgres://db/ownsona"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_data_dir_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    error = _refused(tmp_path, OWNSONA_DATA_DIR=str(locked / "ownsona"))
    assert error.variable == "OWNSONA_DATA_DIR" and "not writable" in str(error)


def test_a_model_dir_needs_the_model_and_its_tokenizer(tmp_path):
    model_dir = tmp_path / "model"
    error = _refused(tmp_path, EMBEDDING_MODEL_DIR=str(model_dir))
    assert error.variable == "EMBEDDING_MODEL_DIR" and "not a directory" in str(error)
    model_dir.mkdir()
    (model_dir / "model.onnx").write_bytes(b"onnx")
    error = _refused(tmp_path, EMBEDDING_MODEL_DIR=str(model_dir))
    assert error.variable == "EMBEDDING_MODEL_DIR" and "tokenizer.json" in str(error)
    (model_dir / "tokenizer.json").write_text("{}")
    assert (
        Settings.from_env(_env(tmp_path, EMBEDDING_MODEL_DIR=str(model_dir))).embedding_model_dir
        == model_dir
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mysql://u@h/db", "postgres:// or postgresql://"),
        ("postgres://u:hunter2-secret@h:5x432/db", "port"),
        ("postgresql://u@h/db?sslmode=required", "sslmode must be one of"),
    ],
)
def test_bad_database_urls_are_refused_without_echoing_them(tmp_path, url, problem):
    error = _refused(tmp_path, DATABASE_URL=url)
    assert error.variable == "DATABASE_URL" and problem in str(error)
    assert "hunter2" not in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "postgres://u:p@db.example:5432/ownsona?sslmode=require",
        "postgresql:///ownsona?host=/run/pg",
    ],
)
def test_platform_database_urls_are_kept_whole(tmp_path, url):
    # The query string (sslmode, a socket directory) is libpq's: it must reach it intact.
    assert Settings.from_env(_env(tmp_path, DATABASE_URL=url)).database_url == url


def test_redis_url_rules(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    cases = {
        "http://cache:6379": "redis://, rediss:// or unix://",
        "redis://cache:63x79/0": "port",
        "redis://cache:6379/zero": "database number",
        f"redis://cache:6379/0?ssl_ca_certs={ca}": "needs a rediss://",
        "rediss://cache:6379/0?ssl_cert_reqs=maybe": "ssl_cert_reqs must be one of",
        f"rediss://cache:6379/0?ssl_ca_certs={tmp_path / 'missing.pem'}": "no readable file",
    }
    for url, problem in cases.items():
        error = _refused(tmp_path, REDIS_URL=url)
        assert error.variable == "REDIS_URL" and problem in str(error), (url, error)
    good = f"rediss://:pw@cache:6380/2?ssl_cert_reqs=required&ssl_ca_certs={ca}"
    assert Settings.from_env(_env(tmp_path, REDIS_URL=good)).redis_url == good


def test_llm_base_url_must_be_a_url(tmp_path):
    error = _refused(
        tmp_path, RELATION_EXTRACTOR="llm", LLM_BASE_URL="localhost:11434", LLM_MODEL="m"
    )
    assert error.variable == "LLM_BASE_URL"


def test_trusted_proxies_are_addresses_networks_or_any(tmp_path):
    assert Settings.from_env(_env(tmp_path)).forwarded_allow_ips == ()
    settings = Settings.from_env(_env(tmp_path, FORWARDED_ALLOW_IPS="10.0.0.0/8, 127.0.0.1,::1"))
    assert settings.forwarded_allow_ips == ("10.0.0.0/8", "127.0.0.1", "::1")
    assert Settings.from_env(_env(tmp_path, FORWARDED_ALLOW_IPS="*")).forwarded_allow_ips == ("*",)
    error = _refused(tmp_path, FORWARDED_ALLOW_IPS="127.0.0.1, proxy.internal")
    assert error.variable == "FORWARDED_ALLOW_IPS" and "'proxy.internal'" in str(error)


def test_shutdown_timeout_is_a_positive_number_of_seconds(tmp_path):
    assert Settings.from_env(_env(tmp_path)).shutdown_timeout_s == 20.0
    assert Settings.from_env(_env(tmp_path, SHUTDOWN_TIMEOUT="8")).shutdown_timeout_s == 8
    for bad in ("0", "soon", "-3", "8.5"):
        assert _refused(tmp_path, SHUTDOWN_TIMEOUT=bad).variable == "SHUTDOWN_TIMEOUT"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("my-box.lan", False),
    ],
)
def test_loopback_addresses(host, loopback):
    assert is_loopback_host(host) is loopback


def test_the_embedded_default_listens_publicly_only_with_a_public_url_and_a_chosen_password():
    public = Settings(host="0.0.0.0")
    problem = public_listen_problem(public)
    assert problem is not None
    assert "OWNSONA_PUBLIC_URL" in problem and "OWNSONA_LOGIN_PASSWORD" in problem
    half = public.with_overrides(public_url="https://mem.example", public_url_set=True)
    problem = public_listen_problem(half)
    assert problem is not None
    assert "OWNSONA_LOGIN_PASSWORD" in problem and "OWNSONA_PUBLIC_URL" not in problem
    assert public_listen_problem(half.with_overrides(login_password=PASSWORD)) is None
    # Loopback needs neither; a DATABASE_URL deployment is configured on purpose.
    assert public_listen_problem(Settings(host="127.0.0.1")) is None
    assert public_listen_problem(public.with_overrides(database_url="postgres://db/x")) is None


# -- ownsona serve refusing to start ------------------------------------------------


def _serve(tmp_path: Path, *args: str, **values: str) -> subprocess.CompletedProcess[str]:
    env = base_env()
    env.update(_env(tmp_path, PORT=str(free_port()), **values))
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", "serve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "values", "named", "not_named"),
    [
        ((), {"OWNSONA_HOST": "0.0.0.0"}, ["OWNSONA_PUBLIC_URL", "OWNSONA_LOGIN_PASSWORD"], []),
        (("--host", "::"), {}, ["OWNSONA_PUBLIC_URL", "OWNSONA_LOGIN_PASSWORD"], []),
        (
            ("--host", "192.168.77.5"),
            {"OWNSONA_PUBLIC_URL": "https://mem.example"},
            ["OWNSONA_LOGIN_PASSWORD"],
            ["OWNSONA_PUBLIC_URL"],
        ),
        (
            (),
            {"OWNSONA_HOST": "0.0.0.0", "OWNSONA_LOGIN_PASSWORD": PASSWORD},
            ["OWNSONA_PUBLIC_URL"],
            ["OWNSONA_LOGIN_PASSWORD"],
        ),
    ],
)
def test_serve_refuses_a_public_bind_of_the_embedded_default(
    tmp_path, args, values, named, not_named
):
    done = _serve(tmp_path, *args, **values)
    assert done.returncode == 2, done.stderr
    assert "configuration error: OWNSONA_HOST" in done.stderr
    for name in named:
        assert name in done.stderr
    for text in not_named:
        assert text not in done.stderr
    assert "Traceback" not in done.stderr
    assert PASSWORD not in done.stderr + done.stdout
    # Refused before anything started: no embedded PostgreSQL was created.
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("args", "values", "variable"),
    [
        ((), {"SHUTDOWN_TIMEOUT": "soon"}, "SHUTDOWN_TIMEOUT"),
        ((), {"FORWARDED_ALLOW_IPS": "the-proxy"}, "FORWARDED_ALLOW_IPS"),
        ((), {"DATABASE_URL": "postgres://u:hunter2-secret@db/x?sslmode=on"}, "DATABASE_URL"),
        ((), {"REDIS_URL": "redis://cache/0?ssl_cert_reqs=required"}, "REDIS_URL"),
        (("--host", "http://0.0.0.0"), {}, "--host"),
    ],
)
def test_serve_names_the_bad_setting(tmp_path, args, values, variable):
    done = _serve(tmp_path, *args, **values)
    assert done.returncode == 2, done.stderr
    assert f"configuration error: {variable}:" in done.stderr
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_serve_listens_publicly_once_both_are_set(tmp_path, pg_data_dir):
    """The positive case, on the session's embedded cluster (its own database in it)."""
    port = free_port()
    env = base_env()
    env.update(
        OWNSONA_DATA_DIR=str(pg_data_dir),
        PORT=str(port),
        OWNSONA_HOST="0.0.0.0",
        OWNSONA_PUBLIC_URL="https://mem.example",
        OWNSONA_LOGIN_PASSWORD=PASSWORD,
    )
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        answer = None
        for _ in range(600):
            if proc.poll() is not None:
                break
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert answer is not None and answer.status_code == 200, log.read_text()
        metadata = httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource").json()
        assert metadata["resource"] == "https://mem.example/mcp"
        assert PASSWORD not in log.read_text()  # it was chosen, so it is never printed
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, log.read_text()
