"""A local OTLP/HTTP trace sink, so a benchmark can measure what tracing on costs.

    python -m scripts.bench.otlp_sink --port 4318 &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python -m scripts.bench.core ...

It accepts ``POST /v1/traces`` as a collector does (an empty protobuf
``ExportTraceServiceResponse`` is zero bytes) and counts requests and bytes,
printed when it stops (SIGINT or SIGTERM). It decodes nothing: the cost being
measured is the server's (building, batching and sending spans), not a
collector's.
"""

from __future__ import annotations

import argparse
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0


def serve(port: int) -> None:
    counts = _Counts()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with counts.lock:
                counts.requests += 1
                counts.bytes += len(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per export would drown the benchmark's own output

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)

    def stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"OTLP sink on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()
    print(f"OTLP sink: {counts.requests} exports, {counts.bytes} bytes", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=4318)
    serve(parser.parse_args().port)


if __name__ == "__main__":
    main()
