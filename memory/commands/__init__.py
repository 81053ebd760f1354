"""Typed commands: a tool call's arguments, validated and parsed before anything runs.

Every tool's arguments are parsed at the edge (the API's tool registry names
each tool's command class) into one of these frozen dataclasses, so unknown
fields, wrong types and out-of-range values are refused with the tool's own
errors before anything runs, or is queued. The queue carries a command as
plain JSON tagged by its type's name (:meth:`Command.to_json`,
:func:`from_json`); each command type has one handler (``memory.handlers``).
A batch item that fails validation stays in its batch as its error, so it
fails alone, as the batch tools promise.

Siblings: ``codec`` (the base class and its JSON), and one module per family
of tools, like ``api/mcp``'s registry and ``memory``'s use cases.
"""

from __future__ import annotations

from .codec import (
    COMMAND_KEY as COMMAND_KEY,
)
from .codec import (
    REGISTERED as REGISTERED,
)
from .codec import (
    Command as Command,
)
from .codec import (
    from_json as from_json,
)
from .editing import (
    Confirm as Confirm,
)
from .editing import (
    Forget as Forget,
)
from .editing import (
    ForgetBatch as ForgetBatch,
)
from .editing import (
    UpdateMemory as UpdateMemory,
)
from .editing import (
    UpdateMemoryBatch as UpdateMemoryBatch,
)
from .learning import (
    Reinforce as Reinforce,
)
from .reading import (
    BuildContextPrompt as BuildContextPrompt,
)
from .reading import (
    CountMemories as CountMemories,
)
from .reading import (
    ExportMemories as ExportMemories,
)
from .reading import (
    GetMemory as GetMemory,
)
from .reading import (
    ListMemories as ListMemories,
)
from .reading import (
    ListTags as ListTags,
)
from .reading import (
    MemoryStats as MemoryStats,
)
from .reading import (
    Recall as Recall,
)
from .reading import (
    TextSearch as TextSearch,
)
from .relations import (
    QueryRelations as QueryRelations,
)
from .remember import (
    Remember as Remember,
)
from .remember import (
    RememberBatch as RememberBatch,
)
from .scans import (
    FindConflicts as FindConflicts,
)
from .scans import (
    FindNearDuplicates as FindNearDuplicates,
)
