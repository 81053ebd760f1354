"""Console pages at 100k memories: time per page, and what the pages cost the server.

    python -m scripts.bench.console [--size 100000] [--rounds 30] [--workdir .bench/console]
        [--pages /console/stats,/console/memories?untagged=1] [--hold]

Runs a real ``ownsona serve`` (embedded PostgreSQL, in-process worker, local
model), seeds the bench account with ``--size`` synthetic facts (embedded by
the local model and copied into PostgreSQL, as ``core.py`` does; created_at
spread over a year, tags from a small set) and an audit log of one call per
five memories, signs in through ``/console/sign-in`` like a browser, and
fetches every console page ``--rounds`` times, pages interleaved so a drifting
machine hits all alike. The server's own time for a request is taken from its
request log (``ms`` of the ``request`` line); the client's round trip over
loopback is printed beside it.

``--pages`` times only the listed pages (as written in ``PAGES``; the warm-up
then fetches only those too), for iterating on one page without waiting for the
clean-up scans. ``--hold`` leaves the server and its embedded cluster running
after the figures, printing the cluster's DSN, until Enter: for EXPLAIN and
profiling against the same store.

Figures are medians and percentiles; the target (issue 15) is p50 at most
150 ms of server time per page at 100k memories.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from memory.providers.embedders import LocalEmbedder
from scripts.bench import corpus
from scripts.bench.core import Server, embed_cached, pct, seed
from storage.embedded import start_embedded

#: Each page a person opens, with a query a person would type.
PAGES = (
    "/console/memories",
    "/console/memories?untagged=1",
    "/console/memories?q=where+does+my+sister+live",
    "/console/memories/{memory_id}",
    "/console/cleanup",
    "/console/cleanup?kind=conflicts",
    "/console/graph?entity=sister",
    "/console/apps",
    "/console/activity",
    "/console/stats",
    "/console/account",
)
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
TAGS = ("family", "work", "health", "travel", "food", "hobby", "home", "money")


def spread(dsn: str, user_id: int, events: int) -> None:
    """Tags and created_at spread out, and an audit log, as a year of use would leave."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """
            UPDATE memories SET
                created_at = now() - make_interval(secs => (id %% 365) * 86400 + id %% 86400),
                updated_at = now() - make_interval(secs => (id %% 365) * 86400 + id %% 86400),
                tags = ARRAY[(%(tags)s::text[])[1 + id %% 8]]
            WHERE user_id = %(user_id)s
            """,
            {"user_id": user_id, "tags": list(TAGS)},
        )
        conn.execute(
            """
            INSERT INTO audit_events (user_id, at, entry, client_id, tool, ok, read_ids,
                changed_ids, duration_ms)
            SELECT %(user_id)s, now() - make_interval(secs => g * 60), 'mcp',
                (ARRAY['https://claude.ai/oauth/mcp-oauth-client-metadata', 'ownsona-cli',
                       'chatgpt'])[1 + g %% 3],
                (ARRAY['recall', 'remember', 'list_memories', 'get_memory'])[1 + g %% 4],
                true, ARRAY[m.id], '{}', 12
            FROM generate_series(1, %(events)s) g
            JOIN LATERAL (SELECT id FROM memories WHERE user_id = %(user_id)s
                          ORDER BY id OFFSET g %% 1000 LIMIT 1) m ON true
            """,
            {"user_id": user_id, "events": events},
        )
        conn.execute("VACUUM ANALYZE memories")
        conn.execute("ANALYZE audit_events")


def sign_in(http: httpx.Client) -> None:
    page = http.get("/console/sign-in")
    match = _CSRF.search(page.text)
    assert match, "the sign-in page carries a CSRF token"
    answer = http.post(
        "/console/sign-in",
        data={"username": "bench", "password": "bench-password", "csrf_token": match.group(1)},
    )
    assert answer.status_code == 303, answer.text


def wait_for_scans(http: httpx.Client, pages: list[str]) -> None:
    """Let the clean-up page's background scans end, so it is timed showing a result.

    Its first view starts a scan (seconds at 100k) and shows "Scanning…" with the job's
    progress URL (``data-job-poll``); until the scan ends the page would be timed
    without its groups.
    """
    for page in pages:
        job = re.search(r'data-job-poll="([^"]+)"', http.get(page).text)
        if job is None:
            continue
        started = time.perf_counter()
        while http.get(job.group(1), headers={"Accept": "application/json"}).json()["state"] == (
            "running"
        ):
            time.sleep(0.5)
        print(f"{page}: its scan took {time.perf_counter() - started:.1f} s", flush=True)


def server_times(log: Path, since: int) -> list[float]:
    """Server-side milliseconds of the console requests logged after byte ``since``."""
    times = []
    with log.open("rb") as f:
        f.seek(since)
        for raw in f:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if str(line.get("path", "")).startswith("/console/") and "duration_ms" in line:
                times.append(float(line["duration_ms"]))
    return times


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 1),
        "p95": round(pct(values, 95), 1),
        "max": round(max(values), 1),
        "n": len(values),
    }


def _measure(
    server: Server, workdir: Path, size: int, rounds: int, chosen: list[str], *, hold: bool
) -> None:
    dsn = start_embedded(workdir / "data")  # the running server's cluster: its address
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM users WHERE username = 'bench'").fetchone()
        assert row is not None
        user_id = int(row[0])
        have = conn.execute(
            "SELECT count(*) FROM memories WHERE user_id = %s", (user_id,)
        ).fetchone()
    if have is None or have[0] != size:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM memories WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM audit_events WHERE user_id = %s", (user_id,))
        texts = list(corpus.facts(size))
        print(f"embedding {len(texts)} facts (cached in {workdir})", flush=True)
        vectors = embed_cached(LocalEmbedder.bundled(), texts, workdir / f"facts-{size}.npy")
        seed(dsn, user_id, texts, vectors, 0)
        spread(dsn, user_id, events=size // 5)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT max(id) FROM memories WHERE user_id = %s", (user_id,)).fetchone()
        assert row is not None
        memory_id = int(row[0])

    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "size": size, "pages": {}}
    log = workdir / "serve.log"
    with httpx.Client(base_url=server.url, timeout=120) as http:
        sign_in(http)
        pages = [p.format(memory_id=memory_id) for p in PAGES if p in chosen]
        for page in pages:  # warm: templates compiled, caches and plans warm
            assert http.get(page).status_code == 200, page
        wait_for_scans(http, [p for p in pages if p.startswith("/console/cleanup")])
        client: dict[str, list[float]] = {p: [] for p in pages}
        server_ms: dict[str, list[float]] = {p: [] for p in pages}
        for _ in range(rounds):
            for page in pages:
                since = log.stat().st_size
                started = time.perf_counter()
                answer = http.get(page)
                client[page].append((time.perf_counter() - started) * 1000)
                assert answer.status_code == 200, (page, answer.status_code)
                # The log line is written before the answer leaves the server.
                server_ms[page] += server_times(log, since)[-1:]
        for page in pages:
            entry = {"client_ms": summary(client[page])}
            if server_ms[page]:
                entry["server_ms"] = summary(server_ms[page])
            results["pages"][page] = entry
            print(json.dumps({page: entry}), flush=True)
    rss, hwm = server.rss_mb()
    results["serve_rss_mb"], results["serve_peak_rss_mb"] = round(rss, 1), round(hwm, 1)
    print(json.dumps(results, indent=2))
    (workdir / "results.json").write_text(json.dumps(results, indent=2))
    if hold:
        print(f"holding: server {server.url}, database {dsn}; Enter stops it", flush=True)
        with contextlib.suppress(EOFError):
            input()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--workdir", default=".bench/console")
    parser.add_argument(
        "--pages", default="", help="comma-separated pages from PAGES to time (default: all)"
    )
    parser.add_argument("--hold", action="store_true", help="keep the server running until Enter")
    args = parser.parse_args()
    chosen = [p for p in args.pages.split(",") if p] or list(PAGES)
    unknown = [p for p in chosen if p not in PAGES]
    if unknown:
        parser.error(f"unknown pages {unknown}; choose from {list(PAGES)}")
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(workdir)
    server.env["LOG_FORMAT"] = "json"
    server.start()
    try:
        _measure(server, workdir, args.size, args.rounds, chosen, hold=args.hold)
    finally:
        # Also when a page fails: a server left running would skew the next run.
        server.stop()


if __name__ == "__main__":
    main()
