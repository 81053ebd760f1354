"""Recall across sessions (issue 28): a long text's word matches count for less.

A chat client stores every turn of both roles. The lexical share counts which
of the question's words a memory holds, not how much else it says: an
assistant's long answer that repeats the question's words holds as many of them
as the user's short statement of the fact, and with both roles stored such
answers filled recall's top ten (``scripts.bench.longmemeval --roles both --diff``).
:func:`length_factor` scales the share of a memory longer than
:data:`LENGTH_REFERENCE` down by its length (BM25's length normalisation against
a fixed length, never above 1: a short text gains nothing), and the session hop
does not bring a neighbour that long (``memory.recall.hops``).

Measured on the development splits and not taken (BENCHMARKS.md, issue 28):
against the candidates' own average length, a store of long texts sets its own
bar (LongMemEval's candidates average 800 to 1,600 characters), and on LoCoMo,
whose turns are of a length, scaling every turn above the average cost
recall@10 (0.763 -> 0.744); against 300 characters, 0.759. Sharing the top ten
among sessions (a session already there yielding to the best match of another
within a margin) lowered LoCoMo at every margin tried and added nothing on
LongMemEval once long texts were scaled.
"""

from __future__ import annotations

#: The length of a memory that keeps its whole lexical share, in characters: a
#: paragraph, longer than most facts. LongMemEval's user turns run about 300
#: characters, its assistant turns 1,000 to 4,000; LoCoMo's turns at most 471.
LENGTH_REFERENCE = 500
#: BM25's ``b``: 1 scales a longer text's share by ``LENGTH_REFERENCE / chars``.
LENGTH_B = 1.0


def length_factor(chars: int, *, reference: int = LENGTH_REFERENCE, b: float = LENGTH_B) -> float:
    """What a text of ``chars`` characters keeps of its lexical share, in (0, 1].

    ``1 / (1 - b + b · chars / reference)``, at most 1 (BM25's length
    normalisation against a fixed length): a text up to ``reference`` characters
    keeps its share; with ``b`` 1, one twice as long keeps half of it.
    """
    if chars <= reference:
        return 1.0
    return 1.0 / (1.0 - b + b * chars / reference)
