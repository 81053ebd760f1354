"""``ownsona seal`` of a plain store while writes continue: 0 lost, progress shown, resumable.

    python -m scripts.bench.seal_move [--memories 100000] [--users 10] [--batch 200]
        [--workdir .bench/seal_move]

Issue 34's target row. In ``--workdir``'s embedded cluster:

1. a plain store is seeded fast (``seal_move_store``: ``--memories`` rows over
   ``--users`` users, half of them the first user's; tags, metadata, tombstones,
   relation edges, write receipts, an upload, a recorded query; a marker written
   plain in each kind of value); the control finds the marker, and ``ownsona
   export`` records every row as it stands;
2. a real ``ownsona serve`` starts sealed (a fresh ``OWNSONA_MASTER_KEY``,
   ``OWNSONA_SEAL_MEMORIES=true``), and one client per user keeps writing over
   HTTP (remember, remember_batch, update_memory of a text or of tags, forget of
   seeded rows), each acknowledged write noted; the first write edits the marker
   row the move reaches last (a plain row changed by a sealing server);
3. ``ownsona seal`` runs as a child process with the same key, its progress bar
   (stderr) recorded. The first run is stopped with SIGINT once it has sealed
   ``--interrupt-at`` of the plain rows, the second with SIGKILL after
   ``--kill-at`` more, the third runs to the end: each run's bar starts at the rows
   still plain (it does not start over);
4. then, writes stopped and the server stopped: every acknowledged write and every
   seeded row is in ``ownsona export`` with the expected text, tags, metadata,
   reason and edges under its own id (lost = 0, wrong = 0); no plain row is left in
   any table; the marker is in no table's text form; each user's term statistics
   equal a recount of their rows.

Prints the summary and writes it to ``--workdir``/summary.json. The elapsed times
are wall clock on whatever else the machine runs: rough, not tuned for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import psycopg

from storage.embedded import start_embedded, stop_embedded
from storage.sealing.master_key import new_key_text

from . import seal_move_store as store
from .core import Server
from .runs import run_facts, work_directory
from .seal_move_writes import Writes

#: A progress bar update: "12345/100000" in tqdm's line.
_PROGRESS = re.compile(r"(\d+)/(\d+)")


@dataclass
class SealRun:
    """One ``ownsona seal`` child: its bar's updates and how it ended."""

    stop_after: int | None
    stop_with: signal.Signals | None
    updates: list[str] = field(default_factory=list)
    done: int = 0
    total: int | None = None
    signalled: bool = False

    def read(self, proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
        """Follow the bar (``\\r``-separated updates); stop the child at ``stop_after``."""
        pending = b""
        while chunk := stderr.read1(4096):  # type: ignore[attr-defined]
            pending += chunk
            *parts, pending = re.split(rb"[\r\n]", pending)
            for part in parts:
                self._update(part.decode(errors="replace").strip(), proc)
        self._update(pending.decode(errors="replace").strip(), proc)

    def _update(self, line: str, proc: subprocess.Popen[bytes]) -> None:
        if not line:
            return
        self.updates.append(line)
        found = _PROGRESS.search(line)
        if found is None:
            return
        self.done, self.total = int(found[1]), int(found[2])
        if self.stop_with and not self.signalled and self.done >= (self.stop_after or 0):
            self.signalled = True
            proc.send_signal(self.stop_with)


def seal_once(env: dict[str, str], dsn: str, batch: int, run: SealRun) -> dict[str, Any]:
    """Run ``ownsona seal`` once as a child process; what it did."""
    plain_before = store.plain_left(dsn)["memories"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "seal", "--batch", str(batch)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None and proc.stdout is not None
    reader = threading.Thread(target=run.read, args=(proc, proc.stderr))
    reader.start()
    out = proc.stdout.read().decode(errors="replace")
    code = proc.wait()
    reader.join()
    elapsed = time.perf_counter() - started
    progress = [u for u in run.updates if _PROGRESS.search(u)]
    return {
        "stopped_with": run.stop_with.name if run.signalled and run.stop_with else None,
        "exit_code": code,
        "elapsed_s": round(elapsed, 1),
        "plain_rows_before": plain_before,
        "plain_rows_after": store.plain_left(dsn)["memories"],
        "bar_total": run.total,
        "bar_done": run.done,
        "progress_updates": len(progress),
        "first_progress": progress[0] if progress else None,
        "last_progress": progress[-1] if progress else None,
        "other_stderr": [u for u in run.updates if not _PROGRESS.search(u)][-5:],
        "stdout": out.strip(),
    }


def _export(env: dict[str, str], path: Path) -> dict[int, dict[str, Any]]:
    """``ownsona export --all-users`` (sealed rows opened with the key in ``env``)."""
    subprocess.run(
        [sys.executable, "-m", "scripts.cli", "export", "--all-users", "--output", str(path)],
        env=env,
        check=True,
        capture_output=True,
    )
    return store.exported(path.read_text().splitlines())


def _edges(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memory_relations").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200, help="ownsona seal --batch")
    parser.add_argument("--interrupt-at", type=float, default=0.2, help="share sealed, SIGINT")
    parser.add_argument("--kill-at", type=float, default=0.3, help="share more, SIGKILL")
    parser.add_argument("--workdir", default=".bench/seal_move")
    args = parser.parse_args()
    workdir = work_directory(args.workdir, fresh=True)
    data = workdir / "data"
    try:
        summary = run(args, workdir, start_embedded(data))
    finally:
        stop_embedded(data)
    print(json.dumps(summary, indent=2))
    (workdir / "summary.json").write_text(json.dumps(summary, indent=2))
    failed = [
        name for name in ("lost", "wrong", "marker_after", "statistics_off_users") if summary[name]
    ]
    failed += ["plain_left"] if any(summary["plain_left"].values()) else []
    failed += ["restarts_started_over"] if summary["seal"]["restarts_started_over"] else []
    if failed:
        raise SystemExit(f"seal_move: failed: {', '.join(failed)} (see above)")


def run(args: argparse.Namespace, workdir: Path, dsn: str) -> dict[str, Any]:
    results: dict[str, Any] = {**run_facts(), "memories": args.memories, "users": args.users}
    started = time.perf_counter()
    seeded = store.seed(dsn, store.layout(args.memories, args.users), np.random.default_rng(3))
    results["seed_s"] = round(time.perf_counter() - started, 1)
    results["edges_seeded"] = _edges(dsn)
    results["marker_before"] = store.marker_hits(dsn)
    server = Server(workdir)
    server.env.update({"OWNSONA_MASTER_KEY": new_key_text(), "OWNSONA_SEAL_MEMORIES": "true"})
    env = server.env
    before = _export(env, workdir / "before.jsonl")
    print(f"seeded {seeded.rows} plain rows in {results['seed_s']} s", flush=True)
    server.start()
    writes = Writes(server, seeded, before)
    writes.start()
    initial = store.plain_left(dsn)["memories"]
    runs = [
        SealRun(int(initial * args.interrupt_at), signal.SIGINT),
        SealRun(int(initial * args.kill_at), signal.SIGKILL),
        SealRun(None, None),
    ]
    seal_started = time.perf_counter()
    try:
        results["seal_runs"] = []
        for seal_run in runs:
            results["seal_runs"].append(seal_once(env, dsn, args.batch, seal_run))
            print(json.dumps(results["seal_runs"][-1]), flush=True)
        seal_s = time.perf_counter() - seal_started
    finally:
        writes.stop()
        server.stop()
    results["seal"] = {
        "plain_rows_at_start": initial,
        "elapsed_s": round(seal_s, 1),
        "rows_per_s": round(initial / seal_s, 1),
        "progress_updates": sum(r["progress_updates"] for r in results["seal_runs"]),
        "last_progress": results["seal_runs"][-1]["last_progress"],
        "interruptions": [r["stopped_with"] for r in results["seal_runs"] if r["stopped_with"]],
        # A restart whose bar counts more than the rows still plain would be starting over.
        "restarts_started_over": sum(
            1
            for r in results["seal_runs"][1:]
            if r["plain_rows_before"] >= initial or (r["bar_total"] or 0) > r["plain_rows_before"]
        ),
    }
    results["writes"] = writes.counts()
    after = _export(env, workdir / "after.jsonl")
    results.update(writes.check(after))
    results["edges_after"] = _edges(dsn)
    results["plain_left"] = store.plain_left(dsn)
    results["marker_after"] = store.marker_hits(dsn)
    results["statistics_off_users"] = store.statistics_off(dsn, sorted(seeded.users.values()))
    results["ids_unchanged"] = all(i in after for i in before)
    return results


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
