"""Ranking and feedback maths (SUPPLEMENT §4). Pure functions over plain values.

Recall is hybrid. Candidates come from the HNSW index (the nearest rows by
cosine) and from full-text search (the rows that hold most of the query's
rarer words); every candidate gets both its cosine and its lexical share, the
part of the query's information (the IDF of its terms) that the row contains.
Its relevance is ``cosine + LEXICAL_WEIGHT · lexical share``, which the learned
factor ``1 + w_s·salience + w_c·context_match`` then multiplies. With no query
word in any candidate this is the order of SUPPLEMENT §4 exactly. The reported
score stays the raw cosine, and ``min_score`` filters on it.

A weighted blend rather than reciprocal rank fusion: on the LoCoMo dev set RRF
(k = 60) reached recall@10 0.62 and MRR 0.43 over the same two rankings, the
blend 0.70 and 0.53. Ranks throw away how much better the first match is,
which is what a rare name or number tells.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar

#: Learning rate of salience updates.
LEARNING_RATE = 0.5
#: Salience step that ``confirm`` counts as.
CONFIRM_DELTA = 0.5
#: Salience step of a ``downweights`` entry on ``remember``.
DOWNWEIGHT_DELTA = -0.5

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def candidate_count(limit: int) -> int:
    """How many nearest rows to fetch before re-ranking: at least 4 x limit and 40."""
    return max(4 * limit, 40)


def lexical_candidate_count(limit: int) -> int:
    """How many rows the lexical side adds: 2 x limit.

    Only rows high in the lexical ranking can gain enough from it to enter the
    results; on the LoCoMo dev set a lexical side of 5 for a limit of 20 already
    scores the same as one of 80.
    """
    return 2 * limit


def blended_score(
    relevance: float, salience: float, context_match: float, w_s: float, w_c: float
) -> float:
    """``relevance · (1 + w_s·salience + w_c·context_match)``: orders results, never reported.

    ``relevance`` is the cosine in SUPPLEMENT §4, the fused score in hybrid recall.
    """
    return relevance * (1.0 + w_s * salience + w_c * max(0.0, context_match))


def next_salience(salience: float, delta: float, rate: float = LEARNING_RATE) -> float:
    """One feedback step; stays inside [-1, 1] for any delta in [-1, 1]."""
    if delta > 0:
        value = salience + rate * delta * (1.0 - salience)
    elif delta < 0:
        value = salience + rate * delta * (1.0 + salience)
    else:
        value = salience
    return min(1.0, max(-1.0, value))


# --- lexical side of hybrid recall -------------------------------------------

#: Weight of the lexical share in the fused relevance ``cosine + w·share``. A row
#: holding every word of the query gains 0.8, about the cosine gap between a
#: good match and an unrelated row for the local model. On the LoCoMo dev set
#: recall@10 and MRR are flat (within 0.01) for weights from 0.6 to 1.0.
LEXICAL_WEIGHT = 0.8
#: Query terms kept, the rarest first: a long prompt is reduced to its most
#: informative words, which keeps the per-row scoring bounded.
MAX_QUERY_TERMS = 32
#: Most rows the lexical probe may read (about 3 µs each on the benchmark
#: machine). Query terms join the probe rarest first while the rows containing
#: them add up to no more than this, so a common word ("like", a partner's name
#: in every other memory) never makes recall read half the store; rows holding
#: only such words can still come in through the vector side, and every
#: candidate is scored on all the query's terms.
PROBE_ROWS = 500


def idf(docs: int, total: int) -> float:
    """Inverse document frequency of a term in ``docs`` of ``total`` rows (BM25's, never negative)."""
    docs = max(0, docs)
    total = max(total, docs)
    return math.log(1.0 + (total - docs + 0.5) / (docs + 0.5))


@dataclass(frozen=True)
class QueryTerm:
    """One search term of a query, its row count in the store and its weight (IDF)."""

    term: str
    docs: int
    weight: float


def weigh_terms(
    term_docs: Sequence[tuple[str, int]], total: int, *, max_terms: int = MAX_QUERY_TERMS
) -> list[QueryTerm]:
    """Weigh each distinct query term by its IDF; keep the ``max_terms`` rarest, rarest first.

    A term no row contains keeps its (highest) weight: it cannot match, but it
    is part of what the query asks, so a row matching the rest of the query
    matched only a share of it.
    """
    seen: dict[str, int] = {}
    for term, docs in term_docs:
        if term:
            seen[term] = max(docs, seen.get(term, 0))
    ordered = sorted(seen.items(), key=lambda item: (item[1], item[0]))
    return [QueryTerm(term, docs, idf(docs, total)) for term, docs in ordered[:max_terms]]


def probe_terms(terms: Sequence[QueryTerm], *, budget: int = PROBE_ROWS) -> list[str]:
    """The terms whose rows are read for lexical candidates: rarest first, within ``budget`` rows."""
    picked: list[str] = []
    rows = 0
    for t in sorted(terms, key=lambda t: (t.docs, t.term)):
        if t.docs <= 0:
            continue  # in no row: nothing to find
        if rows + t.docs > budget:
            break
        rows += t.docs
        picked.append(t.term)
    return picked


def lexical_share(matched_weight: float, terms: Sequence[QueryTerm]) -> float:
    """The part of the query's weight a row contains, in [0, 1] (0 for a query without terms)."""
    total = sum(t.weight for t in terms)
    if total <= 0.0:
        return 0.0
    return min(1.0, max(0.0, matched_weight / total))


def fused_score(cosine: float, lexical: float, w_l: float = LEXICAL_WEIGHT) -> float:
    """``cosine + w_l · lexical share``: the relevance the learned factor multiplies.

    The one place the fused score is computed: the first ranking (:func:`final_score`),
    ``explain``, the time boost's base and the graph hop's pick of each seed's linked
    memories (``memory.recall.hops``) all call it; SQL returns only the raw cosine and
    the matched terms' weight.
    """
    return cosine + w_l * lexical


K = TypeVar("K", bound=Hashable)


def ordinal_ranks(values: Mapping[K, float], *, skip_zero: bool = False) -> dict[K, int]:
    """1-based ranks by descending value (ties by key order of ``values``); zeros left out on request."""
    keys = [k for k, v in values.items() if not (skip_zero and v <= 0.0)]
    keys.sort(key=lambda k: -values[k])
    return {k: i + 1 for i, k in enumerate(keys)}


# --- ordering ----------------------------------------------------------------


class Rankable(Protocol):
    """What ranking reads of one candidate (recall's is :class:`memory.recall.candidates.Candidate`)."""

    @property
    def key(self) -> int: ...
    @property
    def cosine(self) -> float: ...
    @property
    def salience(self) -> float: ...
    @property
    def context_match(self) -> float: ...
    @property
    def last_confirmed_at(self) -> datetime | None: ...
    @property
    def updated_at(self) -> datetime | None: ...
    @property
    def created_at(self) -> datetime | None: ...

    #: Lexical share in [0, 1] (:func:`lexical_share`); 0 for a pure vector search.
    @property
    def lexical(self) -> float: ...

    #: What the question's time adds to the relevance (:mod:`memory.rules.query_time`).
    @property
    def time(self) -> float: ...


R = TypeVar("R", bound=Rankable)


def final_score(c: Rankable, *, w_s: float, w_c: float, w_l: float = LEXICAL_WEIGHT) -> float:
    """The value results are ordered by (never reported)."""
    return blended_score(
        fused_score(c.cosine, c.lexical, w_l) + c.time, c.salience, c.context_match, w_s, w_c
    )


def rank(
    candidates: Sequence[R],
    *,
    w_s: float,
    w_c: float,
    min_score: float | None,
    limit: int,
    w_l: float = LEXICAL_WEIGHT,
) -> list[R]:
    """Filter on raw cosine, order by the blended fused score, newest first on ties."""

    def ts(value: datetime | None) -> float:
        return (value or _EPOCH).timestamp()

    kept = [c for c in candidates if min_score is None or c.cosine >= min_score]
    kept.sort(
        key=lambda c: (
            round(final_score(c, w_s=w_s, w_c=w_c, w_l=w_l), 9),
            ts(c.last_confirmed_at),
            ts(c.updated_at),
            ts(c.created_at),
        ),
        reverse=True,
    )
    return kept[:limit]


@dataclass(frozen=True)
class Explanation:
    """The parts of one match's ranking (recall's ``explain``)."""

    cosine: float
    #: Rank by cosine among all candidates.
    vector_rank: int
    #: Lexical share in [0, 1] and rank by it among candidates with a share (None without).
    lexical: float
    lexical_rank: int | None
    #: ``cosine + w_l · lexical`` and rank by it among all candidates.
    fused: float
    fused_rank: int
    #: What the question's time adds (an event in its window; first or latest asked for).
    time: float
    #: What salience and learned context add: ``r · w_s · salience``, ``r · w_c · context_match``
    #: with ``r = fused + time``.
    salience: float
    context: float
    #: ``fused + time + salience + context``: the value the results are ordered by.
    final: float


def explain(
    candidates: Sequence[Rankable], *, w_s: float, w_c: float, w_l: float = LEXICAL_WEIGHT
) -> dict[int, Explanation]:
    """Every candidate's :class:`Explanation`, by key."""
    by_cosine = ordinal_ranks({c.key: c.cosine for c in candidates})
    by_lexical = ordinal_ranks({c.key: c.lexical for c in candidates}, skip_zero=True)
    fused = {c.key: fused_score(c.cosine, c.lexical, w_l) for c in candidates}
    by_fused = ordinal_ranks(fused)
    out: dict[int, Explanation] = {}
    for c in candidates:
        f = fused[c.key]
        r = f + c.time
        out[c.key] = Explanation(
            cosine=c.cosine,
            vector_rank=by_cosine[c.key],
            lexical=c.lexical,
            lexical_rank=by_lexical.get(c.key),
            fused=f,
            fused_rank=by_fused[c.key],
            time=c.time,
            salience=r * w_s * c.salience,
            context=r * w_c * max(0.0, c.context_match),
            final=final_score(c, w_s=w_s, w_c=w_c, w_l=w_l),
        )
    return out
