"""TLS from the platform's URLs: ``DATABASE_URL``'s ``sslmode`` and ``REDIS_URL``'s ``rediss://``.

PostgreSQL: the embedded cluster has no SSL and listens only on a Unix
socket (where libpq ignores ``sslmode``), so a small TCP forwarder puts it
on 127.0.0.1: ``sslmode=require`` must then fail, clearly, and
``disable``/``prefer`` must work, which shows the query string reaches libpq
through every path (the start-up check, migrations, the pool).

Redis: a throwaway CA and server certificate, Debian's redis-server with
only a TLS port, and a real write through ``ownsona serve`` and ``ownsona
worker``.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from bootstrap.database import resolve_database
from config.settings import Settings
from storage.errors import StorageError
from storage.migrate import migrate
from storage.pool import make_pool
from tests.conftest import TEST_DIMENSIONS
from tests.e2e.server import free_port, run_processes
from tests.opened_rows import memory_texts

from .lifecycle_helpers import base_env, call_tool

SECRET = "hunter2-db-secret"


# -- PostgreSQL sslmode ---------------------------------------------------------------


class _TcpToUnix:
    """Accepts TCP on 127.0.0.1 and pipes each connection to a Unix socket, byte for byte."""

    def __init__(self, socket_path: str) -> None:
        self._path = socket_path
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self._path)
            done = threading.Barrier(2, action=lambda c=client, u=upstream: (c.close(), u.close()))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b, done), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket, done: threading.Barrier) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)  # pass the end of the stream on
        done.wait()  # the last direction to finish closes both sockets

    def close(self) -> None:
        self._closing = True
        self._listener.close()


@pytest.fixture(scope="module")
def tcp_postgres(dsn: str) -> Iterator[int]:
    info = conninfo_to_dict(dsn)
    socket_path = f"{info['host']}/.s.PGSQL.{info.get('port') or 5432}"
    forwarder = _TcpToUnix(socket_path)
    yield forwarder.port
    forwarder.close()


def _url(port: int, sslmode: str) -> str:
    # The platform form: postgres://, a password, sslmode in the query.
    return f"postgres://postgres:{SECRET}@127.0.0.1:{port}/ownsona_test?sslmode={sslmode}"


@pytest.mark.parametrize("sslmode", ["disable", "prefer"])
async def test_sslmode_disable_and_prefer_reach_a_server_without_ssl(tcp_postgres, sslmode):
    url = _url(tcp_postgres, sslmode)
    resolved = conninfo_to_dict(await resolve_database(Settings(database_url=url)))
    # The URL's own parts reach libpq unchanged (the pool adds its keepalives and timeouts).
    assert {k: resolved[k] for k in ("host", "port", "user", "dbname", "sslmode")} == {
        "host": "127.0.0.1",
        "port": str(tcp_postgres),
        "user": "postgres",
        "dbname": "ownsona_test",
        "sslmode": sslmode,
    }
    assert await migrate(url, dimensions=TEST_DIMENSIONS) == []  # up to date, through the URL
    pool = make_pool(url, min_size=1, max_size=1, name="tls-test")
    await pool.open(wait=True, timeout=10)
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute("SELECT current_database()")).fetchone()
        assert row == ("ownsona_test",)
    finally:
        await pool.close()


async def test_sslmode_require_is_honoured_everywhere(tcp_postgres):
    url = _url(tcp_postgres, "require")
    with pytest.raises(StorageError) as caught:
        await resolve_database(Settings(database_url=url))
    message = str(caught.value)
    assert message.startswith("DATABASE_URL: cannot connect:")
    assert "SSL" in message and SECRET not in message
    with pytest.raises(psycopg.OperationalError, match="SSL"):
        await migrate(url, dimensions=TEST_DIMENSIONS)
    pool = make_pool(url, min_size=1, max_size=1, name="tls-test")
    with pytest.raises(PoolTimeout):
        await pool.open(wait=True, timeout=1)
    await pool.close()


def test_a_database_refusing_tls_stops_the_commands_with_one_clear_line(tcp_postgres, tmp_path):
    env = {
        **base_env(),
        "DATABASE_URL": _url(tcp_postgres, "require"),
        "OWNSONA_DATA_DIR": str(tmp_path),
    }
    for command in (["migrate"], ["serve", "--port", str(free_port())]):
        done = subprocess.run(
            [sys.executable, "-m", "scripts.cli", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, (command, done.stderr)
        assert "start-up failed: DATABASE_URL: cannot connect:" in done.stderr
        assert "SSL" in done.stderr
        assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout


# -- Redis over TLS ---------------------------------------------------------------------


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "OwnSona test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A redis-server with only a TLS port; yields (port, CA file)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    directory = tmp_path_factory.mktemp("tls-redis")
    ca, cert, key = _certificates(directory)
    port = free_port()
    log = directory / "redis.log"
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(ca),
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
            "--logfile",
            str(log),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = redis.Redis(
        host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(ca), socket_connect_timeout=1
    )
    try:
        for _ in range(100):
            if proc.poll() is not None:
                problem = (proc.stderr.read() if proc.stderr else "") + (
                    log.read_text() if log.exists() else ""
                )
                pytest.skip(f"redis-server cannot serve TLS here: {problem.strip()[-300:]}")
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        else:
            pytest.fail("the TLS redis-server did not answer")
        yield port, ca
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_write_travels_through_a_tls_only_redis(tls_redis, clean_db, tmp_path):
    port, ca = tls_redis
    url = f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={ca}"
    with run_processes(tmp_path, {"DATABASE_URL": clean_db, "REDIS_URL": url}, workers=1) as server:
        token = server.token()
        stored = call_tool(
            server.url, token, "remember", {"text": "My TLS-carried fact: the boat is blue."}
        )
        found = call_tool(server.url, token, "get_memory", {"id": stored["memory_id"]})
    assert found["memory"]["text"] == "My TLS-carried fact: the boat is blue."
    # The server has no plaintext port: the broker, the results and the API's waiting
    # client all spoke TLS, verified against our CA (ssl_cert_reqs=required).
    rows = [(text,) for _, text in memory_texts(clean_db)]  # sealed or not: what was written
    assert rows == [("My TLS-carried fact: the boat is blue.",)]


def test_an_unverifiable_redis_certificate_stops_the_worker(tls_redis, clean_db, tmp_path):
    port, _ = tls_redis
    env = {
        **base_env(),
        "DATABASE_URL": clean_db,
        # Verification against the system's CAs, which never signed our test CA.
        "REDIS_URL": f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=required",
        "OWNSONA_DATA_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "scripts.cli", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "start-up failed: REDIS_URL: cannot connect:" in done.stderr
    assert "certificate verify failed" in done.stderr
    assert "Traceback" not in done.stderr
