"""Settings, read from the environment once and validated (SUPPLEMENT §9).

Start-up fails fast with :class:`SettingsError` naming the bad variable. Lower
layers receive values from a :class:`Settings`; nothing else reads
``os.environ``.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from config.database_url import check_database_url
from config.env import Env as _Env
from config.env import SettingsError
from config.redis_sentinel import RedisSentinel, read_redis_sentinel
from config.redis_url import check_redis_url

__all__ = ["Settings", "SettingsError"]


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    redis_url: str | None = None
    public_url: str = "http://127.0.0.1:8000"
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = field(default_factory=lambda: Path.home() / ".ownsona")
    login_username: str | None = None
    login_password: str | None = None

    embedding_provider: str = "local"
    embedding_base_url: str | None = None
    embedding_api_key: str | None = None
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    embedding_model_dir: Path | None = None
    embedding_timeout_s: float = 30.0
    #: onnxruntime threads per local model run (EMBEDDING_THREADS); None: every CPU.
    embedding_threads: int | None = None
    #: Query calls (recall...) run at once while reads that embed nothing run
    #: (BUSY_RECALL_LIMIT); None: 2 per CPU with the local model, else no limit; 0: no limit.
    busy_recall_limit: int | None = None

    relation_extractor: str = "rules"
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str | None = None

    max_text_chars: int = 16000
    max_batch_size: int = 200
    default_recall_limit: int = 8
    max_recall_limit: int = 50
    export_max_rows: int = 100_000
    graph_max_relations: int = 100
    rank_salience_weight: float = 0.2
    rank_context_weight: float = 0.2
    #: Recalled memories that disagree about one thing: the freshest first (RECALL_LATEST_FIRST).
    recall_latest_first: bool = True
    #: Recall adds the memories stored next to its best matches in their session
    #: (RECALL_SESSION_HOP).
    recall_session_hop: bool = True
    #: Recall adds memories whose relations name a person or thing its top matches'
    #: relations name (RECALL_GRAPH_HOP; nothing to follow with RELATION_EXTRACTOR=off).
    recall_graph_hop: bool = True
    #: Recall's second stage (RERANK_PROVIDER): "off", or the wire format of a
    #: ``/rerank`` endpoint, "tei" or "jina" (memory.providers.reranker).
    rerank_provider: str = "off"
    rerank_base_url: str | None = None
    rerank_api_key: str | None = None
    rerank_model: str | None = None
    rerank_timeout_s: float = 5.0
    #: The first ranking's candidates the reranker reads (at least the recall's limit).
    rerank_candidates: int = 30

    access_token_ttl_s: int = 3600
    refresh_token_ttl_s: int = 30 * 24 * 3600
    #: A signed access token whose exp - iat exceeds this is refused (and
    #: `ownsona token --ttl` may not ask for more). Never below access_token_ttl_s.
    access_token_max_lifetime_s: int = 30 * 24 * 3600
    oauth_allow_dynamic_registration: bool = True
    #: Seconds a rotated-out refresh token, presented again by its client, still gets the
    #: family's live refresh token instead of revoking the family (parallel refreshes); 0: off.
    oauth_refresh_grace_s: int = 60
    #: Extra browser origins allowed on /mcp (OWNSONA_ALLOWED_ORIGINS, comma-separated).
    allowed_origins: tuple[str, ...] = ()

    #: Largest request body /mcp accepts, in bytes (a full batch of long texts fits).
    max_body_bytes: int = 8 * 1024 * 1024
    #: How long a tool waits for its queued write to finish, in seconds.
    write_timeout_s: float = 60.0
    #: How long a read may wait on the database, in seconds (READ_TIMEOUT): counted only
    #: while it holds or awaits a connection, so a slow embedding provider does not count.
    #: A frozen server answers nothing and closes nothing; this ends the wait (issue 33).
    read_timeout_s: float = 5.0
    #: Seconds during which a second identical write call (same user, tool and
    #: arguments, no explicit idempotency key) is taken for a retry and answered
    #: with the first result (docs/protocol.md, "Retries"); 0: off.
    idempotency_window_s: int = 600
    #: Prefix of OwnSona's keys in Redis: two deployments can share one Redis.
    queue_namespace: str = "ownsona"
    #: A worker silent this long (ms) is presumed dead and its messages are redelivered.
    queue_heartbeat_timeout_ms: int = 15_000
    #: Database connections per process.
    db_pool_min: int = 1
    db_pool_max: int = 10
    #: Read replicas (DATABASE_REPLICA_URLS, comma-separated): streaming standbys of the
    #: DATABASE_URL primary that serve the read tools (storage.replicas).
    database_replica_urls: tuple[str, ...] = ()
    #: A replica further behind the primary than this, in seconds, serves no reads
    #: until it catches up (REPLICA_MAX_LAG_S).
    replica_max_lag_s: float = 5.0
    #: Seconds a connection attempt may take, per host (DB_CONNECT_TIMEOUT; libpq's
    #: connect_timeout, unless the URL sets its own).
    db_connect_timeout_s: int = 5
    #: Longest a statement may run, in seconds (DB_STATEMENT_TIMEOUT); 0: no limit. Long
    #: scans and index builds run on the same pools, hence off by default.
    db_statement_timeout_s: int = 0
    #: Dramatiq worker processes, and threads in each, that ``ownsona worker`` runs.
    worker_processes: int = 1
    worker_threads: int = 4

    #: ``json`` (one object per line), ``text``, or ``auto``: text on a terminal, else json.
    log_format: str = "auto"
    log_level: str = "INFO"
    #: Serve Prometheus metrics at /metrics (404 when off).
    metrics_enabled: bool = False
    #: When set, /metrics wants ``Authorization: Bearer <this>``.
    metrics_token: str | None = None

    #: True when OWNSONA_PUBLIC_URL was set (rather than defaulted from PORT).
    public_url_set: bool = False
    #: Proxies whose X-Forwarded-For/-Proto are believed (FORWARDED_ALLOW_IPS, uvicorn's own
    #: variable): addresses, networks or "*". Empty: the headers are ignored.
    forwarded_allow_ips: tuple[str, ...] = ()
    #: Seconds a stopping process gives in-flight requests and running messages (SIGTERM).
    shutdown_timeout_s: int = 20

    # -- client ID metadata documents (auth.client_documents, auth.metadata_fetch) --
    #: Let a metadata document (or its jwks_uri) be fetched from a loopback address
    #: (CIMD_ALLOW_LOOPBACK): for tests and clients on this machine; never the default.
    cimd_allow_loopback: bool = False
    #: The CA bundle that verifies metadata documents' servers (SSL_CERT_FILE, the standard
    #: variable); None: certifi's bundle, as httpx uses.
    ssl_cert_file: str | None = None

    # -- the owner's console (api.console) and the audit log of tool calls (memory.audit) --
    #: Largest upload the console takes (an export to import, a chat export), in bytes.
    console_upload_max_bytes: int = 64 * 1024 * 1024
    #: Days an audit record is kept; a daily prune removes older ones.
    audit_retention_days: int = 90
    #: Record the query text of read tools in the audit log (the owner's own debugging).
    audit_record_queries: bool = False

    # -- OpenTelemetry traces (bootstrap.tracing); the SDK reads the other OTEL_* itself --
    #: Where spans go (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT,
    #: OTLP/HTTP); None: tracing is off (the default), and so it is with OTEL_SDK_DISABLED=true
    #: or OTEL_TRACES_EXPORTER=none.
    trace_endpoint: str | None = None
    #: OTEL_SERVICE_NAME when set; else each process names itself ``ownsona-<kind>``.
    trace_service_name: str | None = None

    # -- Redis Sentinel (config.redis_sentinel): the broker's master found through Sentinels --
    #: REDIS_SENTINELS + REDIS_SENTINEL_MASTER (+ REDIS_SENTINEL_PASSWORD); None: REDIS_URL alone.
    redis_sentinel: RedisSentinel | None = None

    # -- sealing at rest (docs/at-rest.md); keys never appear in a repr or a log --
    #: The master key, base64 of 32 bytes (OWNSONA_MASTER_KEY).
    master_key: str | None = field(default=None, repr=False)
    #: A file holding the master key (OWNSONA_MASTER_KEY_FILE).
    master_key_file: Path | None = None
    #: The master key before a rotation, while ``ownsona keys rotate`` runs
    #: (OWNSONA_MASTER_KEY_PREVIOUS).
    master_key_previous: str | None = field(default=None, repr=False)
    #: The key store's database (OWNSONA_KEYSTORE_URL); None: ``<name>_keys`` beside the data.
    keystore_url: str | None = field(default=None, repr=False)
    #: Writes seal memory text, tags and terms (OWNSONA_SEAL_MEMORIES, on unless ``0``), given
    #: a master key: the embedded default generates one; DATABASE_URL without one stays plain.
    seal_memories: bool = True

    @property
    def redis_configured(self) -> bool:
        """True when writes go through Redis (REDIS_URL or REDIS_SENTINELS), not in-process."""
        return bool(self.redis_url or self.redis_sentinel)

    @property
    def resource_url(self) -> str:
        """The protected resource: ``<OWNSONA_PUBLIC_URL>/mcp`` (SUPPLEMENT §8)."""
        return f"{self.public_url}/mcp"

    @property
    def issuer(self) -> str:
        return self.public_url

    @property
    def secure_cookies(self) -> bool:
        """Cookies get ``Secure`` (and the ``__Host-`` prefix) when we are served over https."""
        return self.public_url.startswith("https://")

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = _Env(os.environ if environ is None else environ)
        port = env.integer("PORT", 8000, minimum=1, maximum=65535)
        public_url = env.url("OWNSONA_PUBLIC_URL", f"http://127.0.0.1:{port}")
        provider = env.choice("EMBEDDING_PROVIDER", "local", ("local", "openai"))
        settings = cls(
            database_url=env.text("DATABASE_URL"),
            redis_url=env.text("REDIS_URL"),
            public_url=public_url,
            host=check_listen_host("OWNSONA_HOST", env.text("OWNSONA_HOST") or "127.0.0.1"),
            port=port,
            data_dir=Path(env.text("OWNSONA_DATA_DIR") or Path.home() / ".ownsona").expanduser(),
            login_username=env.text("OWNSONA_LOGIN_USERNAME"),
            login_password=env.text("OWNSONA_LOGIN_PASSWORD"),
            embedding_provider=provider,
            embedding_base_url=env.text("EMBEDDING_BASE_URL"),
            embedding_api_key=env.text("EMBEDDING_API_KEY"),
            embedding_model=env.text("EMBEDDING_MODEL"),
            embedding_dimensions=env.optional_integer(
                "EMBEDDING_DIMENSIONS", minimum=1, maximum=16000
            ),
            embedding_model_dir=_optional_path(env.text("EMBEDDING_MODEL_DIR")),
            embedding_timeout_s=env.number("EMBEDDING_TIMEOUT", 30.0, minimum=0.1, maximum=600),
            embedding_threads=env.optional_integer("EMBEDDING_THREADS", minimum=1, maximum=256),
            busy_recall_limit=env.optional_integer("BUSY_RECALL_LIMIT", minimum=0, maximum=10_000),
            relation_extractor=env.choice("RELATION_EXTRACTOR", "rules", ("rules", "llm", "off")),
            llm_base_url=env.text("LLM_BASE_URL"),
            llm_api_key=env.text("LLM_API_KEY"),
            llm_model=env.text("LLM_MODEL"),
            max_text_chars=env.integer("MAX_TEXT_CHARS", 16000, minimum=1, maximum=1_000_000),
            max_batch_size=env.integer("MAX_BATCH_SIZE", 200, minimum=1, maximum=10_000),
            default_recall_limit=env.integer("DEFAULT_RECALL_LIMIT", 8, minimum=1, maximum=1000),
            max_recall_limit=env.integer("MAX_RECALL_LIMIT", 50, minimum=1, maximum=1000),
            export_max_rows=env.integer("EXPORT_MAX_ROWS", 100_000, minimum=1, maximum=10_000_000),
            graph_max_relations=env.integer("GRAPH_MAX_RELATIONS", 100, minimum=1, maximum=100_000),
            rank_salience_weight=env.number("RANK_SALIENCE_WEIGHT", 0.2, minimum=0.0, maximum=10.0),
            rank_context_weight=env.number("RANK_CONTEXT_WEIGHT", 0.2, minimum=0.0, maximum=10.0),
            recall_latest_first=env.boolean("RECALL_LATEST_FIRST", True),
            recall_session_hop=env.boolean("RECALL_SESSION_HOP", True),
            recall_graph_hop=env.boolean("RECALL_GRAPH_HOP", True),
            rerank_provider=env.choice("RERANK_PROVIDER", "off", ("off", "tei", "jina")),
            trace_endpoint=_trace_endpoint(env),
            trace_service_name=env.text("OTEL_SERVICE_NAME"),
            rerank_base_url=env.text("RERANK_BASE_URL"),
            rerank_api_key=env.text("RERANK_API_KEY"),
            rerank_model=env.text("RERANK_MODEL"),
            rerank_timeout_s=env.number("RERANK_TIMEOUT", 5.0, minimum=0.1, maximum=120),
            rerank_candidates=env.integer("RERANK_CANDIDATES", 30, minimum=2, maximum=200),
            access_token_ttl_s=env.integer("ACCESS_TOKEN_TTL", 3600, minimum=10, maximum=86400 * 7),
            refresh_token_ttl_s=env.integer(
                "REFRESH_TOKEN_TTL", 30 * 86400, minimum=60, maximum=86400 * 365
            ),
            access_token_max_lifetime_s=env.integer(
                "ACCESS_TOKEN_MAX_LIFETIME", 30 * 86400, minimum=60, maximum=86400 * 365
            ),
            oauth_allow_dynamic_registration=env.boolean("OAUTH_ALLOW_DYNAMIC_REGISTRATION", True),
            oauth_refresh_grace_s=env.integer(
                "OAUTH_REFRESH_GRACE_SECONDS", 60, minimum=0, maximum=3600
            ),
            allowed_origins=env.origins("OWNSONA_ALLOWED_ORIGINS"),
            max_body_bytes=env.integer(
                "MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024, maximum=1 << 30
            ),
            write_timeout_s=env.number("WRITE_TIMEOUT", 60.0, minimum=1.0, maximum=3600),
            read_timeout_s=env.number("READ_TIMEOUT", 5.0, minimum=0.5, maximum=3600),
            idempotency_window_s=env.integer("IDEMPOTENCY_WINDOW_S", 600, minimum=0, maximum=86400),
            queue_namespace=env.text("QUEUE_NAMESPACE") or "ownsona",
            queue_heartbeat_timeout_ms=env.integer(
                "QUEUE_HEARTBEAT_TIMEOUT", 15_000, minimum=1000, maximum=3_600_000
            ),
            db_pool_min=env.integer("DB_POOL_MIN", 1, minimum=0, maximum=1000),
            db_pool_max=env.integer("DB_POOL_MAX", 10, minimum=1, maximum=1000),
            database_replica_urls=_replica_urls(env.text("DATABASE_REPLICA_URLS")),
            master_key=env.text("OWNSONA_MASTER_KEY"),
            master_key_file=_optional_path(env.text("OWNSONA_MASTER_KEY_FILE")),
            master_key_previous=env.text("OWNSONA_MASTER_KEY_PREVIOUS"),
            keystore_url=env.text("OWNSONA_KEYSTORE_URL"),
            seal_memories=env.boolean("OWNSONA_SEAL_MEMORIES", True),
            replica_max_lag_s=env.number("REPLICA_MAX_LAG_S", 5.0, minimum=0.1, maximum=86_400),
            db_connect_timeout_s=env.integer("DB_CONNECT_TIMEOUT", 5, minimum=2, maximum=300),
            db_statement_timeout_s=env.integer(
                "DB_STATEMENT_TIMEOUT", 0, minimum=0, maximum=86_400
            ),
            worker_processes=env.integer("WORKER_PROCESSES", 1, minimum=1, maximum=64),
            worker_threads=env.integer("WORKER_THREADS", 4, minimum=1, maximum=256),
            log_format=env.choice("LOG_FORMAT", "auto", ("auto", "json", "text")),
            log_level=env.choice(
                "LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")
            ).upper(),
            metrics_enabled=env.boolean("METRICS_ENABLED", False),
            metrics_token=env.text("METRICS_TOKEN"),
            public_url_set=env.text("OWNSONA_PUBLIC_URL") is not None,
            forwarded_allow_ips=env.proxies("FORWARDED_ALLOW_IPS"),
            # Whole seconds: the Procfile hands it to uvicorn's --timeout-graceful-shutdown.
            shutdown_timeout_s=env.integer("SHUTDOWN_TIMEOUT", 20, minimum=1, maximum=3600),
            cimd_allow_loopback=env.boolean("CIMD_ALLOW_LOOPBACK", False),
            ssl_cert_file=env.text("SSL_CERT_FILE"),
            console_upload_max_bytes=env.integer(
                "CONSOLE_UPLOAD_MAX_BYTES", 64 * 1024 * 1024, minimum=1024, maximum=1 << 32
            ),
            audit_retention_days=env.integer("AUDIT_RETENTION_DAYS", 90, minimum=1, maximum=36500),
            audit_record_queries=env.boolean("AUDIT_RECORD_QUERIES", False),
        )
        if settings.default_recall_limit > settings.max_recall_limit:
            raise SettingsError("DEFAULT_RECALL_LIMIT", "must not exceed MAX_RECALL_LIMIT")
        if settings.db_pool_min > settings.db_pool_max:
            raise SettingsError("DB_POOL_MIN", "must not exceed DB_POOL_MAX")
        if settings.ssl_cert_file is not None and not Path(settings.ssl_cert_file).is_file():
            raise SettingsError("SSL_CERT_FILE", f"no such file: {settings.ssl_cert_file}")
        if settings.metrics_token is not None:
            # A bearer token travels in a header: visible ASCII, and long enough not to guess.
            if len(settings.metrics_token) < 16 or not all(
                "!" <= c <= "~" for c in settings.metrics_token
            ):
                raise SettingsError(
                    "METRICS_TOKEN", "must be at least 16 visible ASCII characters, no spaces"
                )
            if not settings.metrics_enabled:
                raise SettingsError("METRICS_TOKEN", "is set but METRICS_ENABLED is not true")
        if provider == "openai":
            if not settings.embedding_base_url:
                raise SettingsError(
                    "EMBEDDING_BASE_URL", "is required with EMBEDDING_PROVIDER=openai"
                )
            if not settings.embedding_model:
                raise SettingsError("EMBEDDING_MODEL", "is required with EMBEDDING_PROVIDER=openai")
            env.url("EMBEDDING_BASE_URL", "")
        if settings.relation_extractor == "llm":
            for name, value in (
                ("LLM_BASE_URL", settings.llm_base_url),
                ("LLM_MODEL", settings.llm_model),
            ):
                if not value:
                    raise SettingsError(name, "is required with RELATION_EXTRACTOR=llm")
            env.url("LLM_BASE_URL", "")
        if settings.rerank_provider != "off":
            if not settings.rerank_base_url:
                raise SettingsError(
                    "RERANK_BASE_URL",
                    f"is required with RERANK_PROVIDER={settings.rerank_provider}",
                )
            env.url("RERANK_BASE_URL", "")
        if settings.redis_url:
            check_redis_url(settings.redis_url)
        # Redis Sentinel: its own block (config.redis_sentinel).
        sentinel = read_redis_sentinel(env, settings.redis_url)
        if sentinel is not None:
            settings = replace(settings, redis_sentinel=sentinel)
        if settings.database_url:
            check_database_url("DATABASE_URL", settings.database_url, writable=True)
        else:
            _check_writable_dir("OWNSONA_DATA_DIR", settings.data_dir)
        _check_replica_urls(settings)
        if provider == "local" and settings.embedding_model_dir is not None:
            _check_model_dir("EMBEDDING_MODEL_DIR", settings.embedding_model_dir)
        return settings


def _trace_endpoint(env: _Env) -> str | None:
    """The OTLP endpoint spans go to, or None when tracing is off (the default)."""
    if env.boolean("OTEL_SDK_DISABLED", False):
        return None
    exporter = (env.text("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    if exporter == "none":
        return None
    if exporter != "otlp":
        raise SettingsError("OTEL_TRACES_EXPORTER", "must be otlp or none")
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if env.text(name):
            return env.url(name, "")
    return None


def _optional_path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def check_listen_host(name: str, value: str) -> str:
    """An address to listen on: an IP literal or a host name (never a URL or host:port)."""
    try:
        return str(ipaddress.ip_address(value.strip("[]")))
    except ValueError:
        pass
    if not _HOST_NAME.match(value):
        raise SettingsError(
            name, f"must be an IP address or host name such as 127.0.0.1 or 0.0.0.0, got {value!r}"
        )
    return value


def is_loopback_host(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name may resolve to any interface


def public_listen_problem(settings: Settings) -> str | None:
    """Why the embedded default must not listen on ``settings.host``, or None.

    The embedded default is a one-person laptop setup. Bound beyond loopback
    it is reachable by others, so it must know the address clients use
    (OWNSONA_PUBLIC_URL: the OAuth issuer and resource) and have a password
    the operator chose (OWNSONA_LOGIN_PASSWORD). A generated password is not
    enough: it is printed once, to whatever captures the terminal (a
    supervisor's log, a container log others can read), and whoever exposes
    a server should have picked its secret on purpose. The variable is also
    the source of truth for the account's password (auth.accounts), so the
    check needs no database and runs before anything starts.
    """
    if settings.database_url or is_loopback_host(settings.host):
        return None
    missing = [
        name
        for name, present in (
            ("OWNSONA_PUBLIC_URL", settings.public_url_set),
            ("OWNSONA_LOGIN_PASSWORD", settings.login_password is not None),
        )
        if not present
    ]
    if not missing:
        return None
    return (
        f"the embedded default listens on {settings.host} (OWNSONA_HOST / --host), beyond this "
        f"machine, only with {' and '.join(missing)} set (the address clients use, and a "
        "password you chose); set them, or listen on 127.0.0.1"
    )


def _replica_urls(raw: str | None) -> tuple[str, ...]:
    """The comma-separated URLs; a comma inside one (libpq's host list) does not split it."""
    if raw is None:
        return ()
    parts = re.split(r",\s*(?=postgres(?:ql)?://)", raw, flags=re.IGNORECASE)
    return tuple(part.strip() for part in parts if part.strip())


def _check_replica_urls(settings: Settings) -> None:
    """Each replica URL reads as libpq reads it; replicas need a DATABASE_URL primary."""
    if settings.database_replica_urls and not settings.database_url:
        raise SettingsError(
            "DATABASE_REPLICA_URLS",
            "needs DATABASE_URL (replicas follow a server primary, not the embedded database)",
        )
    for url in settings.database_replica_urls:
        check_database_url("DATABASE_REPLICA_URLS", url, writable=False)
    if len(set(settings.database_replica_urls)) != len(settings.database_replica_urls):
        raise SettingsError("DATABASE_REPLICA_URLS", "names the same replica twice")


def _check_writable_dir(name: str, path: Path) -> None:
    """The directory exists and is writable, or its nearest existing parent is."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise SettingsError(name, f"{probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SettingsError(name, f"{probe} is not writable by this user")


def _check_model_dir(name: str, path: Path) -> None:
    if not path.is_dir():
        raise SettingsError(name, f"{path} is not a directory")
    for needed in ("model.onnx", "tokenizer.json"):
        if not (path / needed).is_file():
            raise SettingsError(
                name, f"{path} has no {needed} (it needs model.onnx and tokenizer.json)"
            )
