"""``ownsona token`` records what it mints; ``token list`` and ``token revoke`` end it.

The commands run as real processes on the test database; the tokens they
print are then presented at /mcp of an in-process app over the same database.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.api.conftest import (
    PUBLIC_URL,
    Mcp,
    api_settings,
    client,
    keystore,
    runtime,
    use_cases,
    write_queue,
)
from tests.auth.oauth_flow import rows
from tests.conftest import make_user
from tests.e2e.server import free_port
from tests.ops.lifecycle_helpers import base_env, call_tool
from tests.ops.test_backup import REPO

__all__ = ["api_settings", "client", "keystore", "runtime", "use_cases", "write_queue"]


def ownsona(dsn: str | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = base_env()
    if dsn is not None:
        environment.update(DATABASE_URL=dsn, OWNSONA_PUBLIC_URL=PUBLIC_URL)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _mint(dsn: str, *args: str) -> str:
    minted = ownsona(dsn, "token", *args)
    assert minted.returncode == 0, minted.stderr
    return minted.stdout.strip()


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


async def test_minted_tokens_are_listed_and_revoked_one_at_a_time(
    client: Any, clean_db: str
) -> None:
    alice = make_user(clean_db, "alice")
    first = _mint(clean_db, "--user", "alice", "--name", "laptop curl")
    second = _mint(clean_db, "--user", "alice")
    assert rows(clean_db, "SELECT user_id, label, scope FROM cli_tokens ORDER BY id") == [
        (alice, "laptop curl", "memory:read memory:write"),
        (alice, None, "memory:read memory:write"),
    ]
    assert (await Mcp(client, first).request("tools/list")).status_code == 200
    listing = ownsona(clean_db, "token", "list", "--user", "alice")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "USER", "NAME"]
    first_id = rows(clean_db, "SELECT id FROM cli_tokens WHERE jti = %s", _claims(first)["jti"])[0][
        0
    ]
    entry = next(line for line in lines if line.startswith(f"t{first_id} "))
    assert "laptop curl" in entry and "alice" in entry
    assert entry.split()[-3] != "-"  # used once: "last used" is set

    revoked = ownsona(clean_db, "token", "revoke", f"t{first_id}")
    assert revoked.returncode == 0, revoked.stderr
    answer = await Mcp(client, first).request("tools/list")
    assert (
        answer.status_code == 401 and 'error="invalid_token"' in answer.headers["www-authenticate"]
    )
    assert (await Mcp(client, second).request("tools/list")).status_code == 200
    after = ownsona(clean_db, "token", "list").stdout
    assert f"t{first_id} " not in after
    again = ownsona(clean_db, "token", "revoke", f"t{first_id}")
    assert again.returncode == 1 and "no live token" in again.stderr
    assert ownsona(clean_db, "token", "revoke", "12").returncode == 2


async def test_revoke_all_ends_every_token_of_the_user(client: Any, clean_db: str) -> None:
    make_user(clean_db, "alice")
    make_user(clean_db, "bob")
    alices = [_mint(clean_db, "--user", "alice") for _ in range(2)]
    bobs = _mint(clean_db, "--user", "bob")
    ended = ownsona(clean_db, "token", "revoke", "--all", "--user", "alice")
    assert ended.returncode == 0, ended.stderr
    for token in alices:
        assert (await Mcp(client, token).request("tools/list")).status_code == 401
    assert (await Mcp(client, bobs).request("tools/list")).status_code == 200
    listed = ownsona(clean_db, "token", "list").stdout.splitlines()[1:]
    assert [line.split()[1] for line in listed] == ["bob"]


def test_ttl_is_capped_by_the_maximum_lifetime(clean_db: str) -> None:
    make_user(clean_db, "alice")
    refused = ownsona(clean_db, "token", "--user", "alice", "--ttl", "2592001")
    assert refused.returncode == 2 and "ACCESS_TOKEN_MAX_LIFETIME" in refused.stderr
    claims = _claims(_mint(clean_db, "--user", "alice", "--ttl", "2592000"))
    assert claims["exp"] - claims["iat"] == 2592000


def test_minting_for_a_disabled_account_says_how_to_enable_it(clean_db: str) -> None:
    make_user(clean_db, "owner")
    rows(clean_db, "UPDATE users SET disabled = true WHERE username = 'owner' RETURNING id")
    refused = ownsona(clean_db, "token", "--user", "Owner")
    assert refused.returncode == 1 and not refused.stdout
    assert "'owner' is disabled" in refused.stderr
    assert "ownsona user enable owner" in refused.stderr and "user add" not in refused.stderr
    assert rows(clean_db, "SELECT count(*) FROM cli_tokens") == [(0,)]
    missing = ownsona(clean_db, "token", "--user", "nobody")
    assert missing.returncode == 1 and "No account named 'nobody'" in missing.stderr
    assert "ownsona user add" in missing.stderr


def test_token_signs_for_the_url_serve_recorded(tmp_path: Path, clean_db: str) -> None:
    """``serve --port P`` without PORT or OWNSONA_PUBLIC_URL: a token from ``ownsona token`` works."""
    port = free_port()
    data_dir = tmp_path / "data"
    env = base_env()
    env.update(
        DATABASE_URL=clean_db,
        OWNSONA_DATA_DIR=str(data_dir),
        OWNSONA_LOGIN_USERNAME="owner",
        OWNSONA_LOGIN_PASSWORD="correct horse battery",
    )
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115  (closed with the server, below)
    server = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "serve", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, server, tmp_path / "serve.log")
        minted = subprocess.run(
            [sys.executable, "-m", "scripts.cli", "token", "--user", "owner"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert minted.returncode == 0, minted.stderr
        token = minted.stdout.strip()
        assert _claims(token)["iss"] == url
        assert call_tool(url, token, "count_memories", {})["ok"] is True
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    assert (data_dir / "public_url").read_text().strip() == url


def _wait_until_up(url: str, server: subprocess.Popen, log: Path) -> None:
    for _ in range(900):  # bounded: about 90 s
        assert server.poll() is None, log.read_text()
        try:
            if httpx.get(f"{url}/healthz", timeout=0.1).status_code == 200:
                return
        except httpx.HTTPError:
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=0.1)
    raise AssertionError(log.read_text())
