"""The signing-key store (auth.keys) on real PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
from joserfc.jwk import RSAKey

from auth.keys import KeyStore
from auth.tokens import issue_access_token, verify_access_token
from storage import keys as key_rows

PRIVATE_MEMBERS = {"d", "p", "q", "dp", "dq", "qi"}


async def _stored_kids(pool) -> list[str]:
    async with pool.connection() as conn:
        return [row.kid for row in await key_rows.list_usable_keys(conn, 10**6)]


async def test_first_load_creates_one_rs256_key(pool, keystore):
    assert await _stored_kids(pool) == [keystore.signing_key().kid]
    jwks = keystore.jwks()
    assert len(jwks["keys"]) == 1
    (jwk,) = jwks["keys"]
    assert jwk["kid"] == keystore.signing_key().kid
    assert (jwk["kty"], jwk["alg"], jwk["use"]) == ("RSA", "RS256", "sig")
    assert not PRIVATE_MEMBERS & jwk.keys()
    assert RSAKey.import_key(jwk).public_key.key_size == 2048


async def test_a_new_process_reuses_the_keys(pool, keystore, settings):
    token = issue_access_token(keystore, settings, user_id=1, client_id="c", scope="memory")
    restarted = KeyStore(pool)
    await restarted.load()
    assert restarted.signing_key().kid == keystore.signing_key().kid
    assert await _stored_kids(pool) == [keystore.signing_key().kid]
    # Restarting logs nobody out.
    principal = await verify_access_token(restarted, settings, token)
    assert principal.user_id == 1


async def test_processes_loading_together_create_one_key(pool, clean_db):
    stores = [KeyStore(pool) for _ in range(4)]
    await asyncio.gather(*(s.load() for s in stores))
    assert len(await _stored_kids(pool)) == 1
    assert len({s.signing_key().kid for s in stores}) == 1


async def test_rotation_keeps_old_tokens_valid(pool, keystore, settings):
    old_kid = keystore.signing_key().kid
    old_token = issue_access_token(keystore, settings, user_id=1, client_id="c", scope="memory")
    new_kid = await keystore.rotate()
    assert new_kid != old_kid and keystore.signing_key().kid == new_kid
    assert [k["kid"] for k in keystore.jwks()["keys"]] == [new_kid, old_kid]
    assert (await verify_access_token(keystore, settings, old_token)).user_id == 1
    new_token = issue_access_token(keystore, settings, user_id=2, client_id="c", scope="memory")
    assert (await verify_access_token(keystore, settings, new_token)).user_id == 2


async def test_rotation_by_another_process_is_picked_up_on_unknown_kid(
    pool, clean_db, settings, clock
):
    keystore = KeyStore(pool, clock=clock)
    await keystore.load()
    clock.advance(5)  # unknown kids reload at most once per 5 s, counting the load itself
    other = KeyStore(pool)
    await other.load()
    await other.rotate()
    token = issue_access_token(other, settings, user_id=3, client_id="c", scope="memory")
    assert keystore.get(other.signing_key().kid) is None
    assert (await verify_access_token(keystore, settings, token)).user_id == 3
    assert len(keystore.jwks()["keys"]) == 2


async def test_unknown_kids_reload_at_most_once_per_interval(pool, clean_db, settings, clock):
    store = KeyStore(pool, reload_interval_s=5.0, clock=clock)
    await store.load()
    clock.advance(10)
    # A random kid costs one reload...
    assert await store.find("random-kid-1") is None
    # ...after which a key added by another process stays unseen until the interval passes.
    other = KeyStore(pool)
    await other.load()
    new_kid = await other.rotate()
    assert await store.find(new_kid) is None
    assert await store.find("random-kid-2") is None
    clock.advance(5.1)
    assert await store.find(new_kid) is not None


async def test_malformed_kids_never_reload(pool, clean_db, clock):
    store = KeyStore(pool, clock=clock)
    await store.load()
    clock.advance(10)
    other = KeyStore(pool)
    await other.load()
    await other.rotate()
    assert await store.find("not a kid!" * 20) is None
    # The throttle was not spent on the malformed kid.
    assert await store.find(other.signing_key().kid) is not None


async def test_stale_ring_follows_rotation_for_signing(pool, clean_db, clock):
    store = KeyStore(pool, max_age_s=300, clock=clock)
    await store.load()
    other = KeyStore(pool)
    await other.load()
    new_kid = await other.rotate()
    await store.refresh_if_stale()
    assert store.signing_key().kid != new_kid
    clock.advance(301)
    await store.refresh_if_stale()
    assert store.signing_key().kid == new_kid


async def test_retired_keys_drop_out_after_their_grace_period(pool, keystore, settings):
    old_token = issue_access_token(keystore, settings, user_id=1, client_id="c", scope="memory")
    await keystore.rotate()
    keystore.keep_retired_s = 0
    await keystore.load()
    assert len(keystore.jwks()["keys"]) == 1
    with pytest.raises(Exception, match="unknown signing key"):
        await verify_access_token(keystore, settings, old_token)


async def test_keep_retired_covers_the_token_lifetime(pool):
    store = KeyStore(pool, access_token_ttl_s=3600, max_age_s=300)
    assert store.keep_retired_s >= 3600 + 300 + 30


async def test_all_keys_retired_by_hand_creates_a_new_one(pool, keystore):
    old_kid = keystore.signing_key().kid
    async with pool.connection() as conn:
        await key_rows.retire_key(conn, old_kid)
    await keystore.load()
    assert keystore.signing_key().kid != old_kid
    assert {k["kid"] for k in keystore.jwks()["keys"]} == {old_kid, keystore.signing_key().kid}


async def test_use_before_load_is_an_error(pool):
    store = KeyStore(pool)
    assert not store.loaded
    with pytest.raises(RuntimeError):
        store.signing_key()
    with pytest.raises(RuntimeError):
        store.jwks()
