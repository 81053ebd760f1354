"""DATABASE_URL and DATABASE_REPLICA_URLS read the way libpq reads them (issue 29)."""

from __future__ import annotations

import pytest

from config.settings import Settings, SettingsError
from storage.pool import connection_defaults


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:pw@h1:5432,h2:5432/ownsona?target_session_attrs=read-write",
        "postgresql://app:pw@h1:5432,h2:5433/ownsona",
        "postgresql://app@/ownsona?host=h1,h2&port=5432,5433",
        "postgres://app:pw@db.example:5432/ownsona?sslmode=verify-full",
    ],
)
def test_both_multi_host_forms_are_accepted(url: str) -> None:
    assert Settings.from_env({"DATABASE_URL": url}).database_url == url


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://app:s3cret@h1:x/db", "has a port that is not a number from 1 to 65535: 'x'"),
        ("postgresql://app:s3cret@h1:70000/db", "not a number from 1 to 65535"),
        ("postgresql://app:s3cret@h1,h2/db?port=1,2,3", "names 2 host(s) but 3 ports"),
        (
            "postgresql://app:s3cret@h1/db?colour=red",
            'libpq cannot read it: invalid URI query parameter: "colour"',
        ),
        ("postgresql://app:s3%zzcret@h1/db", "libpq cannot read it: invalid percent-encoded token"),
        ("postgresql://app:s3cret@h1,h2/db?target_session_attrs=any", "may pick a standby"),
        ("postgresql://app:s3cret@h1/db?sslmode=sometimes", "sslmode must be one of"),
        ("mysql://app:s3cret@h1/db", "must be a postgres:// or postgresql:// URL"),
    ],
)
def test_malformed_urls_are_refused_naming_the_problem_never_the_password(
    url: str, problem: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"DATABASE_URL": url})
    message = str(caught.value)
    assert message.startswith("DATABASE_URL: ") and problem in message
    assert "s3cret" not in message and "zzcret" not in message


def test_replica_urls_split_on_commas_between_urls_only() -> None:
    settings = Settings.from_env(
        {
            "DATABASE_URL": "postgresql://app@p:5432/ownsona",
            "DATABASE_REPLICA_URLS": "postgresql://app@r1:5432/ownsona, postgres://app@r2:5432,r3:5432/ownsona",
            "REPLICA_MAX_LAG_S": "2.5",
        }
    )
    assert settings.database_replica_urls == (
        "postgresql://app@r1:5432/ownsona",
        "postgres://app@r2:5432,r3:5432/ownsona",
    )
    assert settings.replica_max_lag_s == 2.5
    assert Settings.from_env({}).replica_max_lag_s == 5.0


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"DATABASE_REPLICA_URLS": "postgresql://app@r1/ownsona"}, "needs DATABASE_URL"),
        (
            {
                "DATABASE_URL": "postgresql://app@p/db",
                "DATABASE_REPLICA_URLS": "postgresql://app@r1:y/db",
            },
            "DATABASE_REPLICA_URLS: has a port",
        ),
        (
            {"DATABASE_URL": "postgresql://app@p/db", "REPLICA_MAX_LAG_S": "soon"},
            "REPLICA_MAX_LAG_S",
        ),
    ],
)
def test_bad_replica_settings_are_refused(env: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem):
        Settings.from_env(env)


def test_several_hosts_ask_libpq_for_the_writable_one_unless_the_url_says() -> None:
    several = connection_defaults("postgresql://app@h1:5432,h2:5432/ownsona")
    assert "target_session_attrs=read-write" in several
    assert "connect_timeout=5" in several and "keepalives_idle=5" in several
    chosen = connection_defaults("postgresql://app@h1,h2/ownsona?target_session_attrs=primary")
    assert "target_session_attrs=primary" in chosen
    assert "target_session_attrs" not in connection_defaults("postgresql://app@h1/ownsona")
    assert "target_session_attrs" not in connection_defaults(
        "postgresql://app@h1,h2/ownsona", writable=False
    )
