"""A TCP relay that delays one direction: the network link of an asynchronous standby.

    python -m scripts.cluster.relay LISTEN_PORT TARGET_PORT DELAY_S

The standby connects here; the relay connects to the primary. What the primary
sends (its WAL) reaches the standby ``DELAY_S`` seconds late; what the standby
sends (its feedback) passes at once. Killing the relay with the primary drops
the WAL still in flight, as the death of the primary's machine would: that is
the lag window an asynchronous failover loses.
"""

from __future__ import annotations

import asyncio
import sys
import time


async def _forward_now(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


async def _forward_late(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float
) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                break
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            writer.write(chunk)
            await writer.drain()
        writer.close()

    delivering = asyncio.create_task(deliver())
    while chunk := await reader.read(65536):
        queue.put_nowait((time.monotonic() + delay_s, chunk))
    queue.put_nowait((0.0, b""))
    await delivering


async def _serve(listen_port: int, target_port: int, delay_s: float) -> None:
    async def one(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            upstream_r, upstream_w = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            _forward_now(client_r, upstream_w),
            _forward_late(upstream_r, client_w, delay_s),
            return_exceptions=True,
        )

    server = await asyncio.start_server(one, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
