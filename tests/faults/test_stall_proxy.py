"""The stall proxy itself: each mode fails a client the way its docstring says."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from .stall_proxy import StallProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except ConnectionError:
            pass  # the proxy reset it (refuse)


@pytest.fixture
def proxy() -> Iterator[StallProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with StallProxy(server.server_address[1]) as stall:
        yield stall
    server.shutdown()
    server.server_close()


def _connect(proxy: StallProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=0.3)


def test_freeze_holds_bytes_both_ways_and_the_thaw_delivers_them(proxy: StallProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"one")
        assert sock.recv(16) == b"one"
        proxy.set_mode("freeze")
        sock.sendall(b"two")
        with pytest.raises(TimeoutError):
            sock.recv(16)  # the connection stays open and says nothing
        proxy.set_mode("pass")
        sock.settimeout(5)
        assert sock.recv(16) == b"two"


def test_blackhole_accepts_new_connections_and_never_answers(proxy: StallProxy) -> None:
    with _connect(proxy) as old:
        old.sendall(b"up")
        assert old.recv(16) == b"up"
        proxy.set_mode("blackhole")
        with _connect(proxy) as new:
            new.sendall(b"hello")
            with pytest.raises(TimeoutError):
                new.recv(16)
        old.sendall(b"still")  # an open connection keeps flowing
        old.settimeout(5)
        assert old.recv(16) == b"still"


def _cut(sock: socket.socket) -> bool:
    """Whether the peer reset or closed ``sock`` (what a refused connection looks like)."""
    sock.settimeout(5)
    try:
        sock.sendall(b"y")
        return sock.recv(16) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_refuse_resets_open_and_new_connections(proxy: StallProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"x")
        assert sock.recv(16) == b"x"
        proxy.set_mode("refuse")
        assert _cut(sock)
    assert _new_connection_is_cut(proxy)


def _new_connection_is_cut(proxy: StallProxy) -> bool:
    """Whether a fresh connection is reset: during the handshake or just after it.

    The proxy accepts and resets at once, so a loaded machine may deliver the
    reset before ``connect`` returns; either way the client sees what a
    crashed process shows it.
    """
    try:
        late = _connect(proxy)
    except (ConnectionResetError, ConnectionRefusedError):
        return True
    with late:
        return _cut(late)
