"""Where recall loses evidence against the baselines, question by question (issue 28).

For each question whose evidence turns the cosine or BM25 baseline has in its top 10
and recall does not: the lost turns (role, length, recall's place for them) and the
turns recall put in its top 10 instead, each with what brought it there: ``hop``
(the session or graph hop's pick, and from which match), ``seed session`` (in the
session of one of recall's first three matches), its role and length in characters,
its cosine and lexical share. A summary counts the displacing turns by those traits.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .recall_quality import first_seen

TOP = 10
#: Characters past which a turn counts as long in the summary.
LONG = 600


class Turns(Protocol):
    """A question and its stored turns (``longmemeval.Question``)."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def texts(self) -> tuple[str, ...]: ...
    @property
    def session_of(self) -> Mapping[str, str]: ...


def role_of(text: str) -> str:
    """``assistant`` or ``user`` from the data's ``[<date>] <role>: ...`` text."""
    head = text.split("] ", 1)[-1][:12]
    return "assistant" if head.startswith("assistant") else "user"


def _traits(
    key: str,
    q: Turns,
    text_of: Mapping[str, str],
    why: Mapping[str, dict[str, Any]],
    seeds: set[str],
) -> dict[str, Any]:
    e = why.get(key, {})
    text = text_of[key]
    return {
        "key": key,
        "hop": e.get("hop", "?"),
        "seed_session": q.session_of[key] in seeds,
        "role": role_of(text),
        "chars": len(text),
        "cosine": e.get("cosine"),
        "lexical": e.get("lexical"),
    }


def _fmt(t: Mapping[str, Any]) -> str:
    parts = [t["key"], t["role"], f"{t['chars']} chars", f"by {t['hop']}"]
    if t["seed_session"]:
        parts.append("seed session")
    if t["cosine"] is not None:
        parts.append(f"cos {t['cosine']:.3f}")
    if t.get("lexical") is not None:
        parts.append(f"lex {t['lexical']:.2f}")
    return ", ".join(parts)


def report(questions: Sequence[Turns], dump: Sequence[Mapping[str, Any]]) -> str:
    """The per-question diff and its summary, as text."""
    by_id = {q.id: q for q in questions}
    lines = [f"Evidence lost at {TOP} against cosine or BM25 (recall's top {TOP} instead):"]
    displacers: collections.Counter[str] = collections.Counter()
    lost_traits: collections.Counter[str] = collections.Counter()
    lost_n = won_n = 0
    for d in dump:
        q = by_id[d["id"]]
        evidence = set(d["evidence"])
        if not evidence or d["abstention"]:
            continue
        ours = first_seen(d["ownsona"])[:TOP]
        base = set(first_seen(d["cosine"])[:TOP]) | set(first_seen(d["bm25"])[:TOP])
        lost = sorted((evidence & base) - set(ours))
        won_n += len((evidence & set(ours)) - base)
        if not lost:
            continue
        lost_n += len(lost)
        text_of = dict(zip(q.keys, q.texts, strict=True))
        why = {k: e for e in d.get("explain", []) for k in e.get("keys", [])}
        seeds = {q.session_of[k] for k in ours[:3]}
        place = {k: i + 1 for i, k in enumerate(first_seen(d["ownsona"]))}
        lines.append(f"- {q.id} ({q.type}), evidence {len(evidence)}:")
        for k in lost:
            t = _traits(k, q, text_of, why, seeds)
            where = place.get(k, "absent")
            who = (
                "cosine+BM25"
                if k in d["cosine"][:TOP] and k in d["bm25"][:TOP]
                else ("cosine" if k in d["cosine"][:TOP] else "BM25")
            )
            lines.append(f"    lost (in {who}'s top {TOP}; ours at {where}): {_fmt(t)}")
            lost_traits[t["role"]] += 1
        for k in ours:
            if k in evidence:
                continue
            t = _traits(k, q, text_of, why, seeds)
            lines.append(f"    instead: {_fmt(t)}")
            displacers["all"] += 1
            displacers[f"hop {t['hop']}"] += 1
            displacers[t["role"]] += 1
            displacers[f"long (> {LONG} chars)"] += t["chars"] > LONG
            displacers["seed session"] += t["seed_session"]
    lines.append("")
    lines.append(
        f"{lost_n} evidence turns lost against a baseline's top {TOP} ({dict(lost_traits)}); "
        f"{won_n} found that neither baseline has."
    )
    lines.append(
        "Non-evidence turns in recall's top 10 of those questions: "
        + ", ".join(f"{k} {v}" for k, v in displacers.items())
    )
    return "\n".join(lines)
