"""Storage's error type: problems with the database itself, not with a request."""


class StorageError(Exception):
    """The database cannot be used as configured (version, dimension, start-up)."""
