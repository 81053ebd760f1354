"""Recall quality on LongMemEval: OwnSona's recall tool beside BM25 and cosine-only baselines.

    python -m scripts.bench.longmemeval [--data ../shared/eval/longmemeval] [--limit 50]
        [--roles user|both] [--questions N] [--json out.json] [--workdir DIR]
        [--store DIR [--only-stored]] [--stored-cosine] [--diff]
    python -m scripts.bench.longmemeval --self-check

Issue 28's both-roles measurement, measured again on the same store after a
ranking change (the second run stores nothing and takes a minute or two):

    python -m scripts.bench.longmemeval --roles both --stored-cosine \
        --store /tmp/lme-both --json /tmp/lme-both.json --diff

Data: LongMemEval, "LongMemEval: Benchmarking Chat Assistants on Long-Term
Interactive Memory", Wu, Wang, Yu, Zhang, Chang, Yu (ICLR 2025,
arXiv:2410.10813), the LongMemEval_S variant, cleaned release (Hugging Face
dataset xiaowu0162/longmemeval-cleaned), as split into one file per question
in the GitHub repository hussainzs/Memoria (evaluations/data/lme_jsons/ at
commit 959167b8), licensed MIT (Copyright (c) 2024 Di Wu; the license text
travels with the data, in its LICENSE). The files this script reads are
restructured as described in the data directory's README.md (one gzip'd file
per question: its history's turns as memories, one query).

What it does, through the real tools of a real server (as ``locomo`` does,
with the pieces in :mod:`scripts.bench.recall_quality`):

- starts ``ownsona serve`` on the embedded default (a fresh data directory,
  the local embedder, the in-process worker);
- for each question, creates a fresh account and token and stores its
  history's turns with ``remember_batch`` over ``/mcp`` (``dedup_policy:
  insert``), one memory per turn. Which turns: ``--roles user`` (the default)
  stores the user's turns only, as LongMemEval's own retrieval evaluation
  indexes them at its "turn" granularity (``src/retrieval/run_retrieval.py``
  keeps ``role == "user"``); ``--roles both`` stores the assistant's turns
  too. Under ``user`` the 7 single-session-assistant questions have no stored
  evidence turn (their answer is something the assistant said): they count
  at session level (their evidence session's user turns are stored) and are
  left out of the turn-level figures;
- stores each turn's ``text`` as the data gives it, ``"[<session date>]
  <role>: <content>"`` (the same text the baselines see), with the session's
  date as the turn's ``occurred_at`` (event time, issue 17), and asks each
  question with ``as_of`` its ``question_date``, as a client that knows when
  a conversation happened and when it is asked would; ``--no-event-time``
  stores the text alone and asks at the server's now (the data's dates, taken
  as UTC, are all in the past). A turn the server refuses as a
  secret (``SECRET_REJECTED``; a failed item fails alone) is not stored, as for
  any client: it counts as not recalled, the baselines still rank it, and the
  run says how many there were and how many of them were evidence;
- asks the question with ``recall`` (``limit`` 50 by default, the tool's
  maximum, so that ten distinct sessions can come back; ``explain`` on, kept
  in the ``--json`` dump) and maps the returned ids back to turn keys; a
  memory stored for two identical turns counts for both;
- ``--store DIR`` keeps the server's data directory and what each account
  holds; a later run on it asks again without storing (``--only-stored``: only
  the questions stored so far). ``--stored-cosine`` takes the cosine baseline
  from the vectors the server stored (the same model; each turn is embedded
  once, not twice; a turn refused as a secret is not among them). ``--diff``
  prints, per question, the evidence turns recall loses against a baseline's
  top 10 and what took their places (:mod:`scripts.bench.recall_diff`);
- computes, in the same run and over the same turns, two baselines: Okapi
  BM25 and cosine-only (the same local model, exact cosine over all turns),
  each ranking its top ``limit`` turns.

Metrics (the data README's; each key counts once, at its first place):

- session level: each returned turn counts for its session; the session
  ranking is the sessions in the order of their first returned turn.
  recall_any@k: at least one evidence session (LongMemEval's
  ``answer_session_ids``) in the top k sessions; recall_all@k: all of them;
  NDCG@10: binary relevance, DCG = sum of 1 / log2(rank + 1) over the top 10
  sessions, divided by the DCG of min(10, evidence sessions) relevant
  sessions ranked first (the textbook form; LongMemEval's code leaves the
  first two ranks undiscounted, so its figures are not directly comparable);
- turn level, over the questions with at least one stored evidence
  (``has_answer``) turn: recall@k (share of those turns in the top k keys),
  hit@10, MRR.

Means are reported over the non-abstention questions (the headline, as
LongMemEval's retrieval evaluation leaves ``_abs`` questions out), per
question_type (non-abstention only), and for the abstention questions apart
(session level only: they have no evidence turn; their evidence sessions hold
the related information). ``--self-check`` checks the metric functions on a
hand-made case whose values were worked out by hand, and exits.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import recall_diff
from .recall_quality import (
    BM25,
    KeptStore,
    Server,
    Tally,
    cosine_rankings,
    data_arguments,
    data_files,
    first_seen,
    ingest,
    key_metrics,
    stored_cosine,
    table,
    username,
)

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "longmemeval"
ATTRIBUTION = (
    "Data: LongMemEval_S, cleaned release (Wu et al., ICLR 2025, arXiv:2410.10813), "
    "via hussainzs/Memoria, MIT (Copyright (c) 2024 Di Wu)."
)
#: LongMemEval's question types, in its README's order.
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
HEADLINE = "all but abstention"
ABSTENTION = "abstention"
SESSION_METRICS = ("any@5", "any@10", "all@10", "NDCG@10")
TURN_KS = (1, 5, 10, 50)
TURN_METRICS = (*(f"R@{k}" for k in TURN_KS), "hit@10", "MRR")


# --- data ----------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    id: str
    type: str
    abstention: bool
    question: str
    #: The stored turns: keys, texts, and the session of each key.
    keys: tuple[str, ...]
    texts: tuple[str, ...]
    session_of: Mapping[str, str]
    evidence_sessions: tuple[str, ...]
    #: The stored turns LongMemEval labels has_answer.
    evidence: tuple[str, ...]
    #: Each stored turn's session date, and when the question is asked (RFC 3339, UTC).
    dates: tuple[str, ...] = ()
    asked_at: str | None = None


def load(paths: Sequence[Path], roles: frozenset[str]) -> list[Question]:
    """Every question in the files (or directories of ``*.json.gz``), its turns of ``roles``."""
    out = []
    for file in data_files(paths, "*.json.gz", "LongMemEval"):
        data = json.loads(gzip.decompress(file.read_bytes()))
        (query,) = data["queries"]
        turns = [m for m in data["memories"] if m["role"] in roles]
        out.append(
            Question(
                id=str(query["id"]),
                type=str(query["question_type"]),
                abstention=bool(query["abstention"]),
                question=str(query["question"]),
                keys=tuple(m["key"] for m in turns),
                texts=tuple(m["text"] for m in turns),
                session_of={m["key"]: m["session"] for m in turns},
                evidence_sessions=tuple(query["evidence_sessions"]),
                evidence=tuple(m["key"] for m in turns if m["has_answer"]),
                dates=tuple(_rfc3339(m["date_iso"]) for m in turns),
                asked_at=_rfc3339(_iso_of(query["question_date"])),
            )
        )
    return out


def _iso_of(lme_date: str) -> str:
    """LongMemEval's ``2024/01/08 (Mon) 09:27`` as ``2024-01-08T09:27``."""
    day, _weekday, clock = lme_date.split()
    return f"{day.replace('/', '-')}T{clock}"


def _rfc3339(iso_minutes: str) -> str:
    """``2023-06-13T19:33`` (the data's local time, taken as UTC) as RFC 3339."""
    return f"{iso_minutes}:00Z"


def pick(questions: Sequence[Question], n: int | None) -> list[Question]:
    """The first ``n`` questions taken in turn from each question type (all for None)."""
    if n is None:
        return list(questions)
    by_type = [[q for q in questions if q.type == t] for t in TYPES]
    by_type.append([q for q in questions if q.type not in TYPES])
    out: list[Question] = []
    while len(out) < min(n, len(questions)):
        for group in by_type:
            if group and len(out) < n:
                out.append(group.pop(0))
    return out


# --- metrics -------------------------------------------------------------------


def session_metrics(
    ranked: Iterable[str], session_of: Mapping[str, str], evidence_sessions: Iterable[str]
) -> dict[str, float]:
    """Session-level recall_any@5/@10, recall_all@10 and NDCG@10 of one ranked key list."""
    sessions = first_seen(session_of[key] for key in ranked)
    wanted = set(evidence_sessions)
    top5, top10 = set(sessions[:5]), set(sessions[:10])
    dcg = sum(1 / math.log2(rank + 1) for rank, s in enumerate(sessions[:10], 1) if s in wanted)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(10, len(wanted)) + 1))
    return {
        "any@5": 1.0 if wanted & top5 else 0.0,
        "any@10": 1.0 if wanted & top10 else 0.0,
        "all@10": 1.0 if wanted <= top10 else 0.0,
        "NDCG@10": dcg / ideal,
    }


def self_check() -> None:
    """The metric functions and BM25 on tiny cases, against values worked out by hand."""
    session_of = {k: k.split(":")[0] for k in ("s1:1", "s1:2", "s2:1", "s2:3", "s3:2", "s4:1")}
    # s2:1 is repeated (one memory stored for two turns comes back under both keys):
    # it counts once. Sessions in order of first appearance: s2, s1, s3.
    ranked = ["s2:1", "s2:3", "s2:1", "s1:1", "s3:2", "s1:2"]
    # Evidence sessions s1 (rank 2) and s4 (absent): DCG = 1/log2(3) = 0.63093,
    # ideal DCG = 1/log2(2) + 1/log2(3) = 1.63093, NDCG@10 = 0.38685.
    got = session_metrics(ranked, session_of, ["s1", "s4"])
    want = {"any@5": 1.0, "any@10": 1.0, "all@10": 0.0, "NDCG@10": 0.38685}
    assert all(abs(got[m] - want[m]) < 1e-5 for m in want), got
    # One evidence session in first place: NDCG 1; none returned: 0.
    assert session_metrics(ranked, session_of, ["s2"])["NDCG@10"] == 1.0
    assert session_metrics(ranked, session_of, ["s4"]) == dict.fromkeys(SESSION_METRICS, 0.0)
    # Both sessions among only three: recall_all@10 is 1.
    assert session_metrics(ranked, session_of, ["s1", "s3"])["all@10"] == 1.0
    # A sixth session at rank 6 is past @5 but within @10.
    late = [f"t{i}:1" for i in range(1, 7)]
    got = session_metrics(late, {k: k.split(":")[0] for k in late}, ["t6"])
    assert (got["any@5"], got["any@10"], round(got["NDCG@10"], 5)) == (0.0, 1.0, 0.35621), got
    # Turn level: evidence s1:2 (5th distinct key) and s4:1 (absent).
    got = key_metrics(ranked, ["s1:2", "s4:1"], TURN_KS)
    want = {"R@1": 0.0, "R@5": 0.5, "R@10": 0.5, "R@50": 0.5, "hit@10": 1.0, "MRR": 0.2}
    assert got == want, got
    assert key_metrics(ranked, ["s1:2"], (4,))["R@4"] == 0.0
    # BM25, by hand (k1 1.2, b 0.75, average length 7/3): "apple" scores doc 2
    # (tf 2, length 3) 1.273 x idf, doc 0 (tf 1, length 2) 1.062 x idf; doc 1 lacks it.
    assert BM25(["apple pie", "banana split", "apple apple tart"]).top("Apple?", 10) == [2, 0]
    print("self-check: session metrics, turn metrics and BM25 agree with the hand-worked cases")


# --- run -----------------------------------------------------------------------


def groups_of(question: Question) -> list[str]:
    return [ABSTENTION] if question.abstention else [HEADLINE, question.type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    data_arguments(parser, DEFAULT_DATA, "LongMemEval (.json.gz)")
    parser.add_argument(
        "--limit", type=int, default=50, help="recall limit, and the baselines' (default 50)"
    )
    parser.add_argument(
        "--roles",
        choices=("user", "both"),
        default="user",
        help="store the user's turns only (LongMemEval's turn index; default) or both roles'",
    )
    parser.add_argument(
        "--questions", type=int, help="only N questions, taken in turn from each question type"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keeps the cosine baseline's vectors between runs (default: none kept); the "
        "server's fresh data directory goes under it",
    )
    parser.add_argument(
        "--no-event-time",
        action="store_true",
        help="store the text only and ask at the server's now (default: each turn's "
        "occurred_at is its session's date, and recall's as_of the question's date)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        help="keeps the server's data directory here; a later run with the same directory, "
        "questions and options asks again without storing anything (a ranking change "
        "measured on the same store; the background relation extraction has finished by then)",
    )
    parser.add_argument(
        "--only-stored",
        action="store_true",
        help="with --store: ask only the questions the store already holds, on a second server "
        "beside a run still storing into it (whose database is left running)",
    )
    parser.add_argument(
        "--stored-cosine",
        action="store_true",
        help="compute the cosine baseline from the vectors the server stored (the same "
        "model; each turn embedded once instead of twice)",
    )
    parser.add_argument(
        "--diff",
        action="store_true",
        help="also print, per question, the evidence turns recall loses against cosine or "
        "BM25 at 10 and what took their places (hop, seed's session, role, length)",
    )
    parser.add_argument(
        "--self-check", action="store_true", help="check the metrics on hand-made cases and exit"
    )
    args = parser.parse_args(argv)
    if args.self_check:
        self_check()
        return 0

    began = time.perf_counter()
    roles = frozenset({"user"} if args.roles == "user" else {"user", "assistant"})
    questions = pick(load(args.data, roles), args.questions)
    print(ATTRIBUTION)
    print(
        f"{len(questions)} questions ({sum(q.abstention for q in questions)} abstention), "
        f"{sum(len(q.texts) for q in questions)} memories ({args.roles} turns); "
        f"recall limit {args.limit}",
        flush=True,
    )

    systems = ("ownsona recall", "BM25", "cosine only")
    sessions = {s: Tally() for s in systems}
    turns = {s: Tally() for s in systems}
    dump: list[dict[str, Any]] = []
    started = time.perf_counter()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    cosine: list[list[str]] = []
    if not args.stored_cosine:
        cosine = [
            [q.keys[i] for i in found[0]]
            for q, found in zip(
                questions,
                cosine_rankings(
                    [(q.texts, [q.question]) for q in questions],
                    args.limit,
                    cache=args.workdir / "cosine" if args.workdir else None,
                ),
                strict=True,
            )
        ]
        print(f"cosine baseline: {time.perf_counter() - started:.1f}s", flush=True)

    stored = asked = 0.0
    refusals: list[tuple[Question, str]] = []
    answers: list[tuple[Question, str, dict[int, list[str]], list[str], list[Any]]] = []
    with tempfile.TemporaryDirectory(prefix="ownsona-lme-", dir=args.workdir) as tmp:
        where = args.store or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        kept = KeptStore(where, f"{args.roles} event-time={not args.no_event_time}")
        server = Server(where, "lme")
        try:
            for n, q in enumerate(questions):
                name = username("lme", n, q.id)
                if args.only_stored and kept.get(name, q.keys, q.texts) is None:
                    continue
                started = time.perf_counter()
                if (was := kept.get(name, q.keys, q.texts)) is not None:
                    user, keys_of, refused = was
                    client = server.client_of(user)
                else:
                    user = name
                    if args.store and server.has_user(user):
                        user = f"{name}-{int(time.time())}"  # a run stopped while storing it
                    client = server.client_for(user)
                    # Each history session is one conversation: its turns share a session_id.
                    items: list[dict[str, Any]] = [
                        {"text": t, "session_id": f"{q.id}:{q.session_of[k]}"}
                        for k, t in zip(q.keys, q.texts, strict=True)
                    ]
                    if not args.no_event_time:
                        for item, d in zip(items, q.dates, strict=True):
                            item["occurred_at"] = d
                    keys_of, refused = ingest(client, q.id, q.keys, items)
                    if args.store:
                        kept.put(name, q.keys, q.texts, user, keys_of, refused)
                ingested = time.perf_counter() - started
                started = time.perf_counter()
                ask: dict[str, Any] = {"query": q.question, "limit": args.limit, "explain": True}
                if not args.no_event_time and q.asked_at:
                    ask["as_of"] = q.asked_at
                matches = client.call("recall", ask)["matches"]
                recalled = time.perf_counter() - started
                client.close()
                stored, asked = stored + ingested, asked + recalled
                refusals.extend((q, key) for key in refused)
                answers.append((q, user, keys_of, refused, matches))
                print(
                    f"{n + 1}/{len(questions)} {q.id} ({q.type}): {len(q.texts)} turns sent in "
                    f"{ingested:.1f}s ({len(refused)} refused as secrets), "
                    f"recall {recalled * 1000:.0f} ms",
                    flush=True,
                )
            if args.stored_cosine:
                started = time.perf_counter()
                found = stored_cosine(
                    server, [a[1] for a in answers], [a[0].question for a in answers], args.limit
                )
                cosine = [
                    [k for i, _ in top for k in a[2][i]][: args.limit]
                    for top, a in zip(found, answers, strict=True)
                ]
                print(f"cosine baseline (stored vectors): {time.perf_counter() - started:.1f}s")
        finally:
            server.stop(keep_database=args.only_stored)

    if args.only_stored:
        cosine = (
            [cosine[questions.index(a[0])] for a in answers] if not args.stored_cosine else cosine
        )
    for n, (q, _user, keys_of, refused, matches) in enumerate(answers):
        ranked = {
            "ownsona recall": [k for m in matches for k in keys_of[int(m["id"])]],
            "BM25": [q.keys[i] for i in BM25(q.texts).top(q.question, args.limit)],
            "cosine only": cosine[n],
        }
        for system, keys in ranked.items():
            sessions[system].add(
                groups_of(q), session_metrics(keys, q.session_of, q.evidence_sessions)
            )
            if q.evidence and not q.abstention:
                turns[system].add(groups_of(q), key_metrics(keys, q.evidence, TURN_KS))
        dump.append(
            {
                "id": q.id,
                "question_type": q.type,
                "abstention": q.abstention,
                "evidence_sessions": q.evidence_sessions,
                "evidence": q.evidence,
                "refused": refused,
                **{s.split()[0].lower(): keys for s, keys in ranked.items()},
                "explain": [
                    {"keys": keys_of[int(m["id"])], **m.get("explain", {})} for m in matches
                ],
            }
        )

    groups = [HEADLINE, *TYPES, ABSTENTION]
    print()
    print("Session level (each returned turn counts for its session):")
    print(table(sessions, groups, SESSION_METRICS))
    print()
    print(f"Turn level (questions with a stored evidence turn; {args.roles} turns stored):")
    print(table(turns, groups, TURN_METRICS))
    print()
    print(
        f"{len(refusals)} turns refused as secrets (SECRET_REJECTED), in "
        f"{len({q.id for q, _ in refusals})} questions; evidence among them: "
        f"{sum(key in q.evidence for q, key in refusals)} turns, "
        f"{sum(q.session_of[key] in q.evidence_sessions for q, key in refusals)} in evidence "
        "sessions"
    )
    print(
        f"wall time {time.perf_counter() - began:.0f}s; remember_batch {stored:.0f}s in all "
        f"({sum(len(q.texts) for q in questions) / max(stored, 1e-9):.0f} memories/s), "
        f"recall {asked / max(1, len(questions)) * 1000:.0f} ms per question"
    )
    if args.diff:
        print()
        print(recall_diff.report(questions, dump))
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
