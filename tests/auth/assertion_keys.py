"""A client's signing key and the private_key_jwt assertions it signs (RFC 7523), for tests."""

from __future__ import annotations

import secrets
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, Key, OKPKey, RSAKey


class ClientKey:
    """One key pair of a client; ``jwks()`` is what its metadata document publishes."""

    def __init__(self, alg: str = "RS256", kid: str = "key-1") -> None:
        self.alg = alg
        self.kid = kid
        key: Key
        if alg in ("RS256", "PS256"):
            key = RSAKey.generate_key(2048, parameters={"kid": kid})
        elif alg == "ES256":
            key = ECKey.generate_key("P-256", parameters={"kid": kid})
        else:
            key = OKPKey.generate_key("Ed25519", parameters={"kid": kid})
        self.key = key

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**self.key.as_dict(private=False), "alg": self.alg, "use": "sig"}]}

    def sign(self, client_id: str, audience: str | list[str], **claims: Any) -> str:
        """An assertion of ``client_id`` for ``audience``; ``claims`` replace (None drops) the defaults."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_urlsafe(16),
        }
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        header = {"alg": self.alg, "kid": self.kid, "typ": "JWT"}
        return jwt.encode(header, payload, self.key, algorithms=[self.alg])
