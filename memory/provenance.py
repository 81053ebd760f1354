"""Where a memory came from, for the console (issue 15): which app wrote it, what it replaced.

Read from the rows themselves (``memories.written_by_*`` and
``replaced_by_id``), not the audit log, which forgets after
``AUDIT_RETENTION_DAYS``. The writer is recorded by the insert that created a
row (:mod:`memory.writers`); rows from before that was recorded, and rows
restored from a backup file (which does not carry it), have none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from storage import memory_provenance as store

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

WrittenBy = store.WrittenBy
WrittenCount = store.WrittenCount


@dataclass(frozen=True)
class Provenance:
    #: The app recorded on the row; its fields are None when none was recorded.
    writer: WrittenBy
    #: The memories it replaced (their ``replaced_by_id`` is this one), by id.
    replaces: list[int]
    #: The newer memories whose ``downweights`` named this one, by id.
    downweighted_by: list[int] = field(default_factory=list)
    #: The memories this one's ``downweights`` named, by id.
    downweights: list[int] = field(default_factory=list)


async def of_memory(pool: AsyncConnectionPool, user_id: int, memory_id: int) -> Provenance | None:
    """The user's memory's writer and what it replaced; None when there is no such memory."""
    async with pool.connection() as conn:
        writer = await store.written_by(conn, user_id, memory_id)
        if writer is None:
            return None
        return Provenance(
            writer,
            await store.replaced_ids(conn, user_id, memory_id),
            await store.downweighted_by(conn, user_id, memory_id),
            await store.downweighted(conn, user_id, memory_id),
        )


async def written_counts(pool: AsyncConnectionPool, user_id: int) -> list[WrittenCount]:
    """Per app (client id, and token for a CLI token): the user's memories it wrote."""
    async with pool.connection() as conn:
        return await store.written_counts(conn, user_id)
