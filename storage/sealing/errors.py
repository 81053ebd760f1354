"""The errors of sealing: one base type, and the cases an operator or caller tells apart."""

from __future__ import annotations


class SealingError(Exception):
    """Something about keys or sealed values; the message names the problem, never a key."""


class MasterKeyError(SealingError):
    """The master key is missing, malformed, or not the one the key store was sealed with.

    Raised at start-up: the server refuses to run rather than answer with empty results.
    """


class SealedValueError(SealingError):
    """A sealed value does not open here (docs/at-rest.md, "Errors").

    It was sealed for another user, row or column, under another data key, or was
    altered. Nothing of its content is returned: AES-GCM checks the tag before any
    plaintext is released.
    """


class DataKeyGone(SealingError):
    """The user's data key is not in the key store: the user was deleted (crypto-shredded)."""
