"""Every MCP tool and every documented error, on Citus: the plain suite's tests, run here.

Imported, not copied: pytest runs each again in this package, where ``dsn`` is a Citus
coordinator (``tests/citus/conftest.py``).
"""

from tests.api.test_service_roundtrip import (  # noqa: F401
    real_mcp,
    test_a_retried_write_is_done_once,
    test_remember_recall_forget,
)
