"""The keys a use case runs with: its user's, when memories are sealed (docs/at-rest.md)."""

from __future__ import annotations

from storage.sealing.scope import Scope

from .deps import Deps


async def call_scope(deps: Deps, user_id: int) -> Scope | None:
    """The keys a use case of ``user_id`` runs with (``storage.sealing.scope``); None: unsealed.

    With OWNSONA_SEAL_MEMORIES and a master key the call's writes seal (the user's
    data key made on first use, then cached). Without it no key is looked up (no
    round trip to the key store per call) and a sealed row is refused, not shown.
    """
    keyring = deps.keyring
    if keyring is None or not deps.settings.seal_memories:
        return None
    return Scope(await keyring.user_keys(user_id), seal_writes=True)
