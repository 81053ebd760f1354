"""Traversal: breadth-first search over the stored edges, as a state machine fed by the caller."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .edges import USER, Edge, alias, key, owner_of
from .entities import parse_entity
from .roles import ROLE_WORDS, aliases_of, holders, role_predicates


@dataclass(frozen=True)
class Request:
    """What the traversal wants next: edges touching ``expand``, role edges of ``owners``."""

    expand: tuple[str, ...]
    owners: tuple[str, ...]
    predicates: tuple[str, ...]


class Traversal:
    """Breadth-first search over undirected edges, fed by the caller.

    ``while (req := t.wanted()) is not None: t.feed(fetch(req))``, then read
    :attr:`edges` (each with the hop it was found at). ``fetch`` returns, for
    a request, the edges touching any ``expand`` entity plus the edges whose
    predicate is in ``predicates`` and that touch an ``owners`` entity.

    An alias ("the user's manager") and the holder a role edge names (Dana)
    are one node: reaching either reaches the other at no extra hop.
    """

    def __init__(self, entity: str, *, max_hops: int, max_edges: int) -> None:
        self.path = parse_entity(entity)
        self.max_hops = max_hops
        self.max_edges = max_edges
        #: Each edge found, with the hop (1..max_hops) it was found at.
        self.edges: list[tuple[Edge, int]] = []
        #: True when the edge cap cut the search short.
        self.truncated = False
        self._seen: set[int] = set()
        self._start: set[str] = {self.path.base}
        self._visited: set[str] = {self.path.base}
        self._step = 0  # roles of the path resolved so far
        self._level = 0  # nodes being expanded are this many hops from the start
        self._pending: set[str] = set()  # nodes of this level still to fetch
        self._next: set[str] = set()  # nodes of the next level
        self._awaiting: dict[str, str] = {}  # alias key -> role noun, holders not yet looked up
        self._asked: set[str] = set()
        self._asked_aliases: dict[str, str] = {}
        self._done = max_hops < 1 or max_edges < 1
        if not self.path.roles:
            self._begin_search()

    def wanted(self) -> Request | None:
        """The next request, or None when the search is over."""
        while not self._done:
            if self._step < len(self.path.roles):
                noun = self.path.roles[self._step]
                return Request((), tuple(sorted(self._start)), tuple(sorted(role_predicates(noun))))
            self._asked = {k for k in self._pending if k != USER or k in self._start}
            self._asked_aliases = dict(self._awaiting)
            self._pending, self._awaiting = set(), {}
            owners = sorted({owner_of(a) for a in self._asked_aliases})
            predicates: set[str] = set()
            for noun in self._asked_aliases.values():
                predicates |= role_predicates(noun)
            if self._asked or owners:
                return Request(tuple(sorted(self._asked)), tuple(owners), tuple(sorted(predicates)))
            self._advance()
        return None

    def feed(self, edges: Iterable[Edge]) -> None:
        """The edges answering the last request."""
        batch = sorted({e.id: e for e in edges}.values(), key=lambda e: e.id)
        if self._step < len(self.path.roles):
            self._resolve_step(batch)
            return
        for alias_key, noun in self._asked_aliases.items():
            for holder, edge in holders([owner_of(alias_key)], noun, batch):
                self._collect(edge)
                self._discover(key(holder), same_level=True)
        for edge in batch:
            s, o = key(edge.subject), key(edge.object)
            if s not in self._asked and o not in self._asked:
                continue
            self._collect(edge)
            for end in (s, o):
                self._discover(end, same_level=False)
            for holder, alias_key in aliases_of(edge):
                if holder in self._asked:
                    self._discover(alias_key, same_level=True)
        if not self._pending and not self._awaiting:
            self._advance()

    def _begin_search(self) -> None:
        self._pending = set(self._start)
        for entity in self._start:
            self._await_holders(entity)

    def _await_holders(self, entity: str) -> None:
        if "'s " in entity:
            noun = ROLE_WORDS.get(entity.rsplit("'s ", 1)[1])
            if noun is not None:
                self._awaiting[entity] = noun

    def _resolve_step(self, batch: list[Edge]) -> None:
        noun = self.path.roles[self._step]
        found = {key(holder) for holder, _ in holders(self._start, noun, batch)}
        # The unnamed holder ("the user's manager") is a node too.
        found.update(alias(owner, noun) for owner in self._start)
        self._start = found
        self._visited |= found
        self._step += 1
        if self._step == len(self.path.roles):
            self._begin_search()

    def _collect(self, edge: Edge) -> None:
        if edge.id in self._seen or self._done:
            return
        if len(self.edges) >= self.max_edges:
            self.truncated = True
            self._done = True
            return
        self._seen.add(edge.id)
        self.edges.append((edge, self._level + 1))

    def _discover(self, entity: str, *, same_level: bool) -> None:
        if entity in self._visited:
            return
        self._visited.add(entity)
        if same_level:
            self._pending.add(entity)
            self._await_holders(entity)
        else:
            self._next.add(entity)

    def _advance(self) -> None:
        self._level += 1
        if self._level >= self.max_hops or not self._next:
            self._done = True
            return
        self._pending, self._next = self._next, set()
        for entity in self._pending:
            self._await_holders(entity)


def traverse(
    entity: str, edges: Sequence[Edge], *, max_hops: int, max_edges: int
) -> list[tuple[Edge, int]]:
    """Run a :class:`Traversal` over an in-memory edge list (tests, small graphs)."""
    t = Traversal(entity, max_hops=max_hops, max_edges=max_edges)
    while (request := t.wanted()) is not None:
        expand, owners, preds = set(request.expand), set(request.owners), set(request.predicates)
        t.feed(
            e
            for e in edges
            if key(e.subject) in expand
            or key(e.object) in expand
            or (e.predicate in preds and (key(e.subject) in owners or key(e.object) in owners))
        )
    return t.edges
