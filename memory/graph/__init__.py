"""The relation graph's rules (SUPPLEMENT §6). Pure: standard library only.

Three parts:

- **Roles.** A role phrase ("my manager", "Dana's husband") names whoever
  holds that role toward an owner. A role edge records it with the role's
  predicate: "Dana is my manager." -> ``(Dana, manages, the user)``, "Dana's
  husband is Lee." -> ``(Lee, husband of, Dana)``. A role whose holder is not
  named ("My mom lives in Lisbon.") becomes the alias entity ``the user's
  mother``; aliases and named holders are the same node during traversal.
- **The rules extractor** (:func:`extract`): deterministic patterns for the
  common shapes of personal facts. First-person words resolve to
  ``the user``. Negated, hedged, conditional, future and question sentences
  yield nothing: a graph edge is asserted as true.
- **Traversal** (:class:`Traversal`): breadth-first over edges treated as
  undirected, as a state machine that says which entities it wants edges for
  and is fed the edges, so the I/O stays in the caller (psycopg's
  generators/waiting split). ``the user`` is reached but not expanded unless
  it is where the search starts: nearly every first-person fact touches it,
  and expanding it would turn any two-hop question into a dump of the profile.

The modules, by job: :mod:`.edges` (the value types and entity forms),
:mod:`.roles`, :mod:`.entities` (query phrases), :mod:`.sentences` (sentence
rules and word lists), :mod:`.phrases` (subjects and objects),
:mod:`.extraction` (the rules extractor), :mod:`.normalising` (relations from
elsewhere), :mod:`.conflicts` (functional slots whose values disagree:
``find_conflicts``) and :mod:`.traversal`. This package re-exports the public names.
"""

from .conflicts import (
    FUNCTIONAL_PATTERNS,
    Slot,
    SlotConflict,
    conflicts,
    is_functional,
    slot_of,
    values_match,
)
from .edges import MAX_ENTITY_CHARS, MAX_PREDICATE_CHARS, USER, Edge, Relation, alias, key
from .entities import EntityPath, parse_entity
from .extraction import extract
from .normalising import normalise, normalise_entity, normalise_predicate
from .roles import (
    ALIAS_NOUNS,
    ROLE_WORDS,
    ROLES,
    Role,
    aliases_of,
    holders,
    plural,
    role_predicates,
)
from .sentences import sentences
from .traversal import Request, Traversal, traverse

__all__ = [
    "ALIAS_NOUNS",
    "FUNCTIONAL_PATTERNS",
    "MAX_ENTITY_CHARS",
    "MAX_PREDICATE_CHARS",
    "ROLES",
    "ROLE_WORDS",
    "USER",
    "Edge",
    "EntityPath",
    "Relation",
    "Request",
    "Role",
    "Slot",
    "SlotConflict",
    "Traversal",
    "alias",
    "aliases_of",
    "conflicts",
    "extract",
    "holders",
    "is_functional",
    "key",
    "normalise",
    "normalise_entity",
    "normalise_predicate",
    "parse_entity",
    "plural",
    "role_predicates",
    "sentences",
    "slot_of",
    "traverse",
    "values_match",
]
