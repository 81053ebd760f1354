"""All SQL over ``memories`` (and the write receipts that guard it), by one name.

Callers write ``from storage import memories as store; store.get_memory(...)``;
the statements live in the modules by job and are re-exported here:

- :mod:`storage.memory_reads`: by id, listings, counts and stats;
- :mod:`storage.memory_search`: recall's vector, lexical and hybrid searches;
- :mod:`storage.memory_writes`: inserts, updates, deletes and the lookups a
  write makes first (exact and near copies, tombstones);
- :mod:`storage.receipts`: the write receipts (idempotency).

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

from .memory_reads import (
    count_memories,
    export_rows,
    get_memories_for_update,
    get_memory,
    list_memories,
    store_stats,
    tag_counts,
    text_search,
)
from .memory_search import (
    TEXT_SEARCH_CONFIG,
    HybridCandidate,
    QueryTermStats,
    lexical_candidates,
    query_term_stats,
    search_by_vector,
    search_hybrid,
    window_candidates,
)
from .memory_sql import ACTIVE
from .memory_writes import (
    confirm,
    find_exact,
    hard_delete,
    insert_memories,
    nearest_active,
    nearest_tombstones,
    set_salience,
    soft_delete,
    update_fields,
)
from .receipts import get_receipt, lock_receipt_key, prune_receipts, put_receipt

__all__ = [
    "ACTIVE",
    "TEXT_SEARCH_CONFIG",
    "HybridCandidate",
    "QueryTermStats",
    "confirm",
    "count_memories",
    "export_rows",
    "find_exact",
    "get_memories_for_update",
    "get_memory",
    "get_receipt",
    "hard_delete",
    "insert_memories",
    "lexical_candidates",
    "list_memories",
    "lock_receipt_key",
    "nearest_active",
    "nearest_tombstones",
    "prune_receipts",
    "put_receipt",
    "query_term_stats",
    "search_by_vector",
    "search_hybrid",
    "set_salience",
    "soft_delete",
    "store_stats",
    "tag_counts",
    "text_search",
    "update_fields",
    "window_candidates",
]
