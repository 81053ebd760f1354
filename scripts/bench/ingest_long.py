"""Long-memory ingest: remember_batch of conversation turns against the raw embedder, and RSS.

    python -m scripts.bench.ingest_long [--histories 2] [--batch 50] [--max-batches 2]
        [--data ../shared/eval/longmemeval] [--workdir .bench/ingest_long] [--fresh]

Data: LongMemEval_S (Wu et al., ICLR 2025, arXiv:2410.10813), cleaned
release, MIT; the development files in ``../shared/eval/longmemeval/`` (see
its README). Only the turn texts are used, as a chat-history import would
send them.

Runs a real ``ownsona serve`` (embedded PostgreSQL, in-process worker and
relation extraction, local model) and, in the same run:

- for each batch of ``--batch`` turns (the histories' turns in order, every
  turn of ``--histories`` questions' histories), embeds the batch with the
  raw local embedder in this process, then stores the same texts with
  ``remember_batch`` over ``/mcp`` (``dedup_policy: insert``); the headline
  is the ratio of the two medians (items/s), target >= 0.8;
- then ``--max-batches`` batches of 200 items of ``MAX_TEXT_CHARS`` (16,000)
  characters each (turns joined until full), each timed against the
  server's write wait (``WRITE_TIMEOUT``, 60 s): none may outlast it;
- samples the serving process's resident memory (``/proc/<pid>/status``
  VmRSS, every 50 ms) during the whole ingest, and reports its peak, the
  kernel's high-water mark (VmHWM) and the RSS once the relation-extraction
  jobs have drained; target <= 300 MB during and after.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from memory.providers.embedders import LocalEmbedder

from .core import Server
from .runs import run_facts, work_directory

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "longmemeval"
ATTRIBUTION = (
    "Data: LongMemEval_S (Wu et al., ICLR 2025, arXiv:2410.10813), cleaned release, MIT "
    "(Copyright (c) 2024 Di Wu)."
)
MAX_TEXT_CHARS = 16_000
WRITE_WAIT_S = 60.0


def load_turns(data: Path, histories: int) -> list[str]:
    files = sorted(data.glob("lme_*.json.gz"))[:histories]
    if not files:
        raise SystemExit(f"no LongMemEval files in {data}")
    texts: list[str] = []
    for file in files:
        texts += [m["text"] for m in json.loads(gzip.decompress(file.read_bytes()))["memories"]]
    return texts


def full_length_texts(turns: list[str], n: int) -> list[str]:
    """``n`` distinct texts of exactly MAX_TEXT_CHARS, made of consecutive turns."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        parts = [f"Import part {len(out)}."]
        while sum(len(p) + 1 for p in parts) < MAX_TEXT_CHARS:
            parts.append(turns[i % len(turns)])
            i += 1
        out.append(" ".join(parts)[:MAX_TEXT_CHARS])
    return out


class RssSampler:
    """Samples a process's VmRSS every ``interval_s`` in a thread; keeps the peak."""

    def __init__(self, pid: int, interval_s: float = 0.05) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def read(self, field: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        raise KeyError(field)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_mb = max(self.peak_mb, self.read())
            except (OSError, KeyError):
                return
            self._stop.wait(self.interval_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def call(server: Server, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One tool call: (payload, seconds); a tool error is returned, not raised."""
    assert server.client is not None
    started = time.perf_counter()
    reply = server.client.http.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        },
        timeout=httpx.Timeout(300),
    )
    elapsed = time.perf_counter() - started
    reply.raise_for_status()
    payload: dict[str, Any] = reply.json()["result"]["structuredContent"]
    return payload, elapsed


def raw_rate(embedder: LocalEmbedder, texts: list[str]) -> float:
    started = time.perf_counter()
    asyncio.run(embedder.embed(texts))
    return len(texts) / (time.perf_counter() - started)


def drained(server: Server, sampler: RssSampler, *, quiet_s: float, most_s: float) -> float:
    """Wait until the server's CPU has been idle for ``quiet_s`` (extraction jobs done)."""
    started = time.monotonic()

    def cpu() -> float:
        stat = Path(f"/proc/{sampler.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")

    last, idle_since = cpu(), time.monotonic()
    while time.monotonic() - started < most_s:
        time.sleep(0.25)
        now = cpu()
        if now - last > 0.05:
            idle_since = time.monotonic()
        last = now
        if time.monotonic() - idle_since >= quiet_s:
            break
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--histories", type=int, default=2, help="question histories to ingest")
    parser.add_argument("--batch", type=int, default=50, help="items per remember_batch")
    parser.add_argument("--max-batches", type=int, default=2, help="200 x 16,000-char batches")
    parser.add_argument("--workdir", default=".bench/ingest_long")
    parser.add_argument("--fresh", action="store_true", help="start from an empty database")
    args = parser.parse_args()
    workdir = work_directory(args.workdir, fresh=args.fresh)
    print(ATTRIBUTION, flush=True)

    turns = load_turns(args.data, args.histories)
    embedder = LocalEmbedder.bundled()
    server = Server(workdir)
    server.start()
    assert server.proc is not None
    results: dict[str, Any] = {
        **run_facts(),
        "turns": len(turns),
        "mean_chars": round(statistics.mean(len(t) for t in turns)),
        "batch": args.batch,
    }
    try:
        with RssSampler(server.proc.pid) as sampler:
            results["rss_start_mb"] = round(sampler.read(), 1)
            rates, raw_rates, worst = [], [], 0.0
            for b in range(0, len(turns), args.batch):
                # A run id keeps texts new when the work directory is reused.
                texts = [f"{t} [run {time.time():.0f}]" for t in turns[b : b + args.batch]]
                raw_rates.append(raw_rate(embedder, texts))
                payload, seconds = call(
                    server,
                    "remember_batch",
                    {"items": [{"text": t} for t in texts], "dedup_policy": "insert"},
                )
                if not payload.get("ok"):
                    raise SystemExit(f"remember_batch failed after {seconds:.1f} s: {payload}")
                rates.append(len(texts) / seconds)
                worst = max(worst, seconds)
                if (b // args.batch) % 5 == 0:
                    print(
                        f"  {b + len(texts)}/{len(turns)}: {rates[-1]:.1f}/s"
                        f" (raw {raw_rates[-1]:.1f}/s), rss {sampler.read():.0f} MB",
                        flush=True,
                    )
            results["turns_ingest"] = {
                "items_per_s": round(statistics.median(rates), 1),
                "raw_embedder_per_s": round(statistics.median(raw_rates), 1),
                "fraction": round(statistics.median(rates) / statistics.median(raw_rates), 2),
                "slowest_batch_s": round(worst, 1),
                "peak_rss_mb": round(sampler.peak_mb, 1),
            }
            print(json.dumps({"turns_ingest": results["turns_ingest"]}), flush=True)
            full = full_length_texts(turns, 200 * args.max_batches)
            times, raw_full = [], []
            for b in range(args.max_batches):
                texts = [
                    f"{t[:-20]} [run {time.time():.0f}]" for t in full[b * 200 : (b + 1) * 200]
                ]
                raw_full.append(200 / raw_rate(embedder, texts))
                payload, seconds = call(
                    server,
                    "remember_batch",
                    {"items": [{"text": t} for t in texts], "dedup_policy": "insert"},
                )
                times.append(seconds)
                status = "ok" if payload.get("ok") else payload.get("error", {}).get("code")
                print(
                    f"  200 x {MAX_TEXT_CHARS} chars: {seconds:.1f} s ({status}),"
                    f" raw embedder {raw_full[-1]:.1f} s",
                    flush=True,
                )
            results["full_length_batches"] = {
                "seconds": [round(t, 1) for t in times],
                "raw_embedder_s": [round(t, 1) for t in raw_full],
                "write_wait_s": WRITE_WAIT_S,
                "within_wait": all(t < WRITE_WAIT_S for t in times),
                "peak_rss_mb": round(sampler.peak_mb, 1),
            }
            waited = drained(server, sampler, quiet_s=3.0, most_s=600)
            results["rss_during_peak_mb"] = round(sampler.peak_mb, 1)
            results["rss_after_mb"] = round(sampler.read(), 1)
            results["rss_hwm_mb"] = round(sampler.read("VmHWM"), 1)
            results["drain_s"] = round(waited, 1)
    finally:
        server.stop()
    print(json.dumps(results, indent=2))
    (workdir / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
