"""``reinforce``: feedback that teaches recall which memories help (SUPPLEMENT §4).

Salience takes one :func:`memory.rules.ranking.next_salience` step per call; a
positive step also counts a use and, with a ``query``, moves the row's context
centroid toward the query's embedding. Reinforce never edits text and never
deletes, so the keep lock does not apply (tools chapter, reinforce).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from memory.rules import ranking
from storage import learning as learned
from storage import memories as store

from .calls import CallMeta
from .commands.handling import handles
from .commands.learning import Reinforce
from .deps import Deps
from .writes import run_write


def next_centroid(
    centroid: npt.NDArray[Any] | None, count: int, query: npt.NDArray[Any]
) -> npt.NDArray[np.float32]:
    """``normalize(c·n + q)``: the normalized running mean of the taught query embeddings.

    ``centroid`` is the current (unit) centroid, ``count`` the number of
    queries it has been taught; None or a zero count start from ``query``.
    """
    q = np.asarray(query, dtype=np.float64)
    total = (
        q if centroid is None or count <= 0 else np.asarray(centroid, dtype=np.float64) * count + q
    )
    norm = float(np.linalg.norm(total))
    if norm == 0.0:  # only if q cancels the history exactly; start over from q
        total, norm = q, float(np.linalg.norm(q))
    return (total / norm).astype(np.float32)


@handles(Reinforce, reads=False)
async def reinforce(deps: Deps, meta: CallMeta, command: Reinforce) -> dict[str, Any]:
    user_id, idempotency_key = meta.user_id, meta.idempotency_key
    ids, delta, query = list(command.memory_ids), command.delta, command.query
    # The tools chapter: the query is ignored for negative (and null) feedback.
    query_vector = await deps.embedder.embed_one(query) if query is not None and delta > 0 else None

    async def work(conn: psycopg.AsyncConnection) -> dict[str, Any]:
        rows = await store.get_memories_for_update(conn, user_id, ids)
        now = datetime.now(UTC)
        live = [
            i
            for i in ids
            if (row := rows.get(i)) is not None
            and row.deleted_at is None
            and (row.expires_at is None or row.expires_at > now)
        ]
        current = await learned.centroids(conn, user_id, live) if query_vector is not None else {}
        updates = []
        for i in live:
            row = rows[i]
            centroid = None
            if query_vector is not None:
                centroid = next_centroid(current.get(i), row.context_count, query_vector)
            updates.append(
                learned.Feedback(
                    id=i,
                    salience=ranking.next_salience(row.salience, delta),
                    use_count_increment=1 if delta > 0 else 0,
                    centroid=centroid,
                    context_count_increment=1 if centroid is not None else 0,
                )
            )
        states = await learned.apply_feedback(conn, user_id, updates)
        payload: dict[str, Any] = {
            "ok": True,
            "reinforced": [
                {
                    "id": i,
                    "salience": round(states[i].salience, 6),
                    "use_count": states[i].use_count,
                    "context_count": states[i].context_count,
                }
                for i in live
            ],
        }
        skipped = [i for i in ids if i not in states]
        if skipped:
            payload["skipped"] = skipped
        payload["message"] = (
            "Ok" if live else "None of the ids is an active memory; nothing changed."
        )
        return payload

    return await run_write(deps, user_id, command.type_name(), idempotency_key, work)
