"""SQL fragments every query over ``memories`` shares."""

from __future__ import annotations

from .rows import select_list

#: The columns of a :class:`~storage.rows.MemoryRow`, bare and under the alias ``m``.
COLUMNS = select_list()
M_COLUMNS = select_list(prefix="m.")

#: A row recall, listing and counting may show: not forgotten, not expired.
ACTIVE = "deleted_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
M_ACTIVE = "m.deleted_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())"
