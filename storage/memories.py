"""All SQL over ``memories`` (and the write receipts that guard it), by one name.

Callers write ``from storage import memories as store; store.get_memory(...)``;
the statements live in the modules by job and are re-exported here (``name as
name``: an explicit re-export, with no list of names to keep in step):

- :mod:`storage.memory_reads`: by id, listings, counts and stats;
- :mod:`storage.memory_search`: recall's vector, lexical and hybrid searches;
- :mod:`storage.memory_writes`: inserts, updates, deletes and the lookups a
  write makes first (exact and near copies, tombstones);
- :mod:`storage.receipts`: the write receipts (idempotency).

Every function takes a connection: the caller owns the transaction. Every
query is scoped by ``user_id`` (SUPPLEMENT §1).
"""

from __future__ import annotations

from .memory_reads import count_memories as count_memories
from .memory_reads import export_rows as export_rows
from .memory_reads import get_memories_for_update as get_memories_for_update
from .memory_reads import get_memory as get_memory
from .memory_reads import list_memories as list_memories
from .memory_reads import store_stats as store_stats
from .memory_reads import tag_counts as tag_counts
from .memory_reads import text_search as text_search
from .memory_search import TEXT_SEARCH_CONFIG as TEXT_SEARCH_CONFIG
from .memory_search import QueryTermStats as QueryTermStats
from .memory_search import lexical_candidates as lexical_candidates
from .memory_search import query_term_stats as query_term_stats
from .memory_search import search_by_vector as search_by_vector
from .memory_search import search_hybrid as search_hybrid
from .memory_search import window_candidates as window_candidates
from .memory_sql import ACTIVE as ACTIVE
from .memory_writes import confirm as confirm
from .memory_writes import find_exact as find_exact
from .memory_writes import hard_delete as hard_delete
from .memory_writes import insert_memories as insert_memories
from .memory_writes import nearest_active as nearest_active
from .memory_writes import nearest_tombstones as nearest_tombstones
from .memory_writes import set_salience as set_salience
from .memory_writes import soft_delete as soft_delete
from .memory_writes import update_fields as update_fields
from .receipts import get_receipt as get_receipt
from .receipts import lock_receipt_key as lock_receipt_key
from .receipts import prune_receipts as prune_receipts
from .receipts import put_receipt as put_receipt
