"""Sealing at rest (issue 34): what a user wrote, sealed with that user's own data key.

Only the standard library and ``cryptography``'s primitives (AES-GCM, HMAC,
HKDF); nothing of ours, so ``storage`` and ``memory`` may both import it.
docs/at-rest.md describes the key hierarchy, the value format and what an
operator backs up.
"""
