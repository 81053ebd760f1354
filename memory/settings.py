"""Settings, read from the environment once and validated (SUPPLEMENT §9).

Start-up fails fast with :class:`SettingsError` naming the bad variable. Lower
layers receive values from a :class:`Settings`; nothing else reads
``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit


class SettingsError(ValueError):
    """A configuration variable has a bad value; the message names it."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


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

    access_token_ttl_s: int = 3600
    refresh_token_ttl_s: int = 30 * 24 * 3600
    oauth_allow_dynamic_registration: bool = True
    #: Extra browser origins allowed on /mcp (OWNSONA_ALLOWED_ORIGINS, comma-separated).
    allowed_origins: tuple[str, ...] = ()

    #: Largest request body /mcp accepts, in bytes (a full batch of long texts fits).
    max_body_bytes: int = 8 * 1024 * 1024
    #: How long a tool waits for its queued write to finish, in seconds.
    write_timeout_s: float = 60.0
    #: Prefix of OwnSona's keys in Redis: two deployments can share one Redis.
    queue_namespace: str = "ownsona"
    #: A worker silent this long (ms) is presumed dead and its messages are redelivered.
    queue_heartbeat_timeout_ms: int = 15_000
    #: Database connections per process.
    db_pool_min: int = 1
    db_pool_max: int = 10

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

    def with_overrides(self, **changes: object) -> "Settings":
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = _Env(os.environ if environ is None else environ)
        port = env.integer("PORT", 8000, minimum=1, maximum=65535)
        public_url = env.url("OWNSONA_PUBLIC_URL", f"http://127.0.0.1:{port}")
        provider = env.choice("EMBEDDING_PROVIDER", "local", ("local", "openai"))
        settings = cls(
            database_url=env.text("DATABASE_URL"),
            redis_url=env.text("REDIS_URL"),
            public_url=public_url,
            host=env.text("OWNSONA_HOST") or "127.0.0.1",
            port=port,
            data_dir=Path(env.text("OWNSONA_DATA_DIR") or Path.home() / ".ownsona").expanduser(),
            login_username=env.text("OWNSONA_LOGIN_USERNAME"),
            login_password=env.text("OWNSONA_LOGIN_PASSWORD"),
            embedding_provider=provider,
            embedding_base_url=env.text("EMBEDDING_BASE_URL"),
            embedding_api_key=env.text("EMBEDDING_API_KEY"),
            embedding_model=env.text("EMBEDDING_MODEL"),
            embedding_dimensions=env.optional_integer("EMBEDDING_DIMENSIONS", minimum=1, maximum=16000),
            embedding_model_dir=_optional_path(env.text("EMBEDDING_MODEL_DIR")),
            embedding_timeout_s=env.number("EMBEDDING_TIMEOUT", 30.0, minimum=0.1, maximum=600),
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
            access_token_ttl_s=env.integer("ACCESS_TOKEN_TTL", 3600, minimum=10, maximum=86400 * 7),
            refresh_token_ttl_s=env.integer(
                "REFRESH_TOKEN_TTL", 30 * 86400, minimum=60, maximum=86400 * 365
            ),
            oauth_allow_dynamic_registration=env.boolean("OAUTH_ALLOW_DYNAMIC_REGISTRATION", True),
            allowed_origins=env.origins("OWNSONA_ALLOWED_ORIGINS"),
            max_body_bytes=env.integer("MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024, maximum=1 << 30),
            write_timeout_s=env.number("WRITE_TIMEOUT", 60.0, minimum=1.0, maximum=3600),
            queue_namespace=env.text("QUEUE_NAMESPACE") or "ownsona",
            queue_heartbeat_timeout_ms=env.integer(
                "QUEUE_HEARTBEAT_TIMEOUT", 15_000, minimum=1000, maximum=3_600_000
            ),
            db_pool_min=env.integer("DB_POOL_MIN", 1, minimum=0, maximum=1000),
            db_pool_max=env.integer("DB_POOL_MAX", 10, minimum=1, maximum=1000),
        )
        if settings.default_recall_limit > settings.max_recall_limit:
            raise SettingsError("DEFAULT_RECALL_LIMIT", "must not exceed MAX_RECALL_LIMIT")
        if settings.db_pool_min > settings.db_pool_max:
            raise SettingsError("DB_POOL_MIN", "must not exceed DB_POOL_MAX")
        if provider == "openai":
            if not settings.embedding_base_url:
                raise SettingsError("EMBEDDING_BASE_URL", "is required with EMBEDDING_PROVIDER=openai")
            if not settings.embedding_model:
                raise SettingsError("EMBEDDING_MODEL", "is required with EMBEDDING_PROVIDER=openai")
            env.url("EMBEDDING_BASE_URL", "")
        if settings.relation_extractor == "llm":
            for name, value in (("LLM_BASE_URL", settings.llm_base_url), ("LLM_MODEL", settings.llm_model)):
                if not value:
                    raise SettingsError(name, "is required with RELATION_EXTRACTOR=llm")
        if settings.redis_url and urlsplit(settings.redis_url).scheme not in ("redis", "rediss", "unix"):
            raise SettingsError("REDIS_URL", "must be a redis://, rediss:// or unix:// URL")
        if settings.database_url and urlsplit(settings.database_url).scheme not in (
            "postgres",
            "postgresql",
        ):
            raise SettingsError("DATABASE_URL", "must be a postgres:// or postgresql:// URL")
        return settings


def _optional_path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


class _Env:
    """Typed reads of environment variables; every failure names its variable."""

    _TRUE = frozenset({"1", "true", "yes", "on"})
    _FALSE = frozenset({"0", "false", "no", "off"})

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def text(self, name: str) -> str | None:
        value = self._environ.get(name)
        if value is None:
            return None
        value = value.strip()
        return value or None

    def integer(self, name: str, default: int, *, minimum: int, maximum: int) -> int:
        value = self.optional_integer(name, minimum=minimum, maximum=maximum)
        return default if value is None else value

    def optional_integer(self, name: str, *, minimum: int, maximum: int) -> int | None:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(name, f"must be a whole number, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise SettingsError(name, f"must be between {minimum} and {maximum}, got {value}")
        return value

    def number(self, name: str, default: float, *, minimum: float, maximum: float) -> float:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(name, f"must be a number, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise SettingsError(name, f"must be between {minimum} and {maximum}, got {value}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() in self._TRUE:
            return True
        if raw.lower() in self._FALSE:
            return False
        raise SettingsError(name, f"must be true or false, got {raw!r}")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() not in choices:
            raise SettingsError(name, f"must be one of {', '.join(choices)}, got {raw!r}")
        return raw.lower()

    def origins(self, name: str) -> tuple[str, ...]:
        """A comma-separated list of ``scheme://host[:port]`` origins."""
        raw = self.text(name)
        if raw is None:
            return ()
        found = []
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            parts = urlsplit(item)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
                raise SettingsError(name, f"must list origins such as https://app.example, got {item!r}")
            if parts.query or parts.fragment:
                raise SettingsError(name, f"an origin has no query or fragment, got {item!r}")
            found.append(f"{parts.scheme}://{parts.netloc}")
        return tuple(found)

    def url(self, name: str, default: str) -> str:
        raw = self.text(name) or default
        parts = urlsplit(raw)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SettingsError(name, f"must be an http:// or https:// URL, got {raw!r}")
        if parts.query or parts.fragment:
            raise SettingsError(name, "must not carry a query or fragment")
        # Clients compare the issuer byte for byte (RFC 8414 §3.3): one canonical form.
        return raw.rstrip("/")
