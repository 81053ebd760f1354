"""Fetching a client's documents from the Internet without becoming a proxy into our network.

A client ID metadata document (and the ``jwks_uri`` it names) is fetched
from a URL the *client* chose, so every fetch is a server-side request an
attacker can aim (draft-ietf-oauth-client-id-metadata-document §6.6, SSRF).
The rules, each enforced here and not left to the caller:

- ``https`` only, on the default or an explicit port; no user information.
- The host's addresses are resolved here, every one is checked, and the
  connection is made to a checked address (never to the name, which a
  second DNS answer could point elsewhere: DNS rebinding). The address the
  socket actually connected to is checked again. Refused: loopback (unless
  ``allow_loopback``), private, link-local, CGNAT (100.64/10), multicast,
  reserved, unspecified, and IPv6 forms that carry one of those (IPv4-mapped,
  NAT64, 6to4). TLS still verifies the certificate for the *name* (SNI).
- No proxy from the environment (the proxy would be what we connect to).
- No redirects: a 3xx is a refusal.
- One total deadline (:data:`FETCH_TIMEOUT_S`) over resolving, connecting,
  TLS and reading; the body is streamed and abandoned past :data:`MAX_BYTES`.

Failures raise :class:`FetchError`, whose message is safe to show the user.
:func:`cache_lifetime` reads a response's HTTP caching headers (RFC 9111).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import json
import socket
import ssl
import time
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

#: Seconds one fetch may take, all included.
FETCH_TIMEOUT_S = 5.0
#: Largest document read, in bytes.
MAX_BYTES = 64 * 1024
#: Longest URL fetched.
MAX_URL_CHARS = 2000

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: Resolves a host name to its addresses (as strings); the default asks the system.
Resolver = Callable[[str, int], Awaitable[list[str]]]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class FetchError(Exception):
    """A document could not be fetched under the rules; the message says why, for the user."""


@dataclass(frozen=True)
class FetchedJson:
    """A fetched JSON document and how long it may be reused (0: not at all)."""

    url: str
    body: Any
    ttl_s: float


def address_problem(address: IPAddress, *, allow_loopback: bool) -> str | None:
    """Why we must not connect to ``address``, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return address_problem(embedded, allow_loopback=allow_loopback)
    if address.is_loopback:
        return None if allow_loopback else "a loopback address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_link_local:
        return "a link-local address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a shared (CGNAT) address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a reserved address"
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is not one we fetch from (scheme, shape), or None."""
    if len(url) > MAX_URL_CHARS:
        return f"the URL is longer than {MAX_URL_CHARS} characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return "the URL is malformed"
    if parts.scheme != "https":
        return "only https URLs are fetched"
    if not parts.hostname:
        return "the URL has no host"
    if parts.username is not None or parts.password is not None:
        return "the URL must not contain user information"
    if parts.fragment:
        return "the URL must not contain a fragment"
    return None


#: Fetches one process runs at once; more wait (within their own deadline). Anyone can
#: make us fetch by naming a URL at /oauth/authorize, so this bounds what that costs.
MAX_CONCURRENT_FETCHES = 4


def _getaddrinfo(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


class SystemResolver:
    """getaddrinfo on threads of its own: a slow name server (anyone can pick the name)
    then ties up these two threads, never the default executor that password checks use.
    A lookup given up on at the deadline still finishes on its thread."""

    def __init__(self, threads: int = 2) -> None:
        self._threads = threads
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    async def __call__(self, host: str, port: int) -> list[str]:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self._threads, thread_name_prefix="metadata-dns"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, _getaddrinfo, host, port)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to checked addresses."""

    def __init__(self, resolver: Resolver, allow_loopback: bool) -> None:
        self._resolver = resolver
        self._allow_loopback = allow_loopback
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._checked(host, port)
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    str(address), port, timeout=timeout, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as ex:
                failure = ex
                continue
            peer = stream.get_extra_info("server_addr")
            connected = ipaddress.ip_address(peer[0]) if peer else None
            if connected is None or connected != address:
                await stream.aclose()
                raise FetchError(f"{host} connected to an unexpected address")
            return stream
        raise FetchError(f"could not connect to {host}") from failure

    async def _checked(self, host: str, port: int) -> list[IPAddress]:
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            raw = [literal]
        else:
            try:
                raw = [
                    ipaddress.ip_address(a.split("%")[0]) for a in await self._resolver(host, port)
                ]
            except (OSError, ValueError):
                raise FetchError(f"{host} does not resolve") from None
        if not raw:
            raise FetchError(f"{host} does not resolve")
        for address in raw:
            problem = address_problem(address, allow_loopback=self._allow_loopback)
            if problem is not None:
                # One bad address refuses the name: which one we would get is not ours to choose.
                raise FetchError(f"{host} resolves to {problem}, which is never fetched")
        return list(dict.fromkeys(raw))

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise FetchError("unix sockets are never fetched")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over an httpcore pool that uses :class:`_GuardedBackend`."""

    def __init__(self, ssl_context: ssl.SSLContext, resolver: Resolver, allow_loopback: bool):
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=20,
            http1=True,
            http2=False,
            retries=0,
            network_backend=_GuardedBackend(resolver, allow_loopback),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except httpcore.TimeoutException:
            raise FetchError("the server did not answer in time") from None
        except httpcore.ConnectError as ex:
            raise FetchError(_tls_or_connect(ex)) from None
        except httpcore.NetworkError:
            raise FetchError("the connection failed") from None
        except httpcore.ProtocolError:
            raise FetchError("the server's answer is not valid HTTP") from None
        assert isinstance(response.stream, typing.AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: typing.AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> typing.AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except httpcore.TimeoutException:
            raise FetchError("the server did not answer in time") from None
        except (httpcore.NetworkError, httpcore.ProtocolError):
            raise FetchError("the connection failed while reading") from None

    async def aclose(self) -> None:
        closer = getattr(self._stream, "aclose", None)
        if closer is not None:
            await closer()


def _tls_or_connect(ex: Exception) -> str:
    if "CERTIFICATE" in str(ex).upper() or "SSL" in str(ex).upper():
        return "the server's TLS certificate is not trusted"
    return "could not connect to the server"


class MetadataFetcher:
    """Fetches small JSON documents under the rules of this module; one per process.

    ``ssl_context`` verifies the servers (bootstrap gives one built from
    ``SSL_CERT_FILE`` or certifi), or makes the context that will: the HTTP
    client and its context are built on the first fetch, so a process that
    never meets a metadata document pays nothing at start-up (loading a CA
    bundle is most of an httpx client's cost). ``resolver`` replaces the
    system resolver (tests map public names to local addresses through
    it); ``timeout_s`` and ``max_bytes`` default to the documented limits.
    """

    def __init__(
        self,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        *,
        allow_loopback: bool = False,
        resolver: Resolver | None = None,
        timeout_s: float = FETCH_TIMEOUT_S,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._ssl_context = ssl_context
        self._own_resolver = SystemResolver() if resolver is None else None
        self._resolver: Resolver = resolver or self._own_resolver  # type: ignore[assignment]
        self._allow_loopback = allow_loopback
        self._http: httpx.AsyncClient | None = None
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_FETCHES)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            context = self._ssl_context
            if not isinstance(context, ssl.SSLContext):
                try:
                    context = context()
                except (OSError, ssl.SSLError):
                    raise FetchError("the server's CA bundle cannot be read") from None
            self._http = httpx.AsyncClient(
                transport=_GuardedTransport(context, self._resolver, self._allow_loopback),
                follow_redirects=False,
                trust_env=False,
                timeout=self._timeout_s,
                # identity: the size cap counts the bytes that arrive, with no decompression bomb.
                headers={
                    "Accept": "application/json",
                    "Accept-Encoding": "identity",
                    "User-Agent": "OwnSona",
                },
            )
        return self._http

    async def fetch_json(self, url: str) -> FetchedJson:
        """The JSON document at ``url``; :class:`FetchError` on any failure."""
        problem = url_problem(url)
        if problem is not None:
            raise FetchError(problem)
        try:
            # The deadline covers waiting for a slot too: a flood of fetches of slow
            # servers delays others by at most it.
            async with asyncio.timeout(self._timeout_s), self._slots:
                status, headers, body = await self._get(url)
        except TimeoutError:
            raise FetchError("the server did not answer in time") from None
        if 300 <= status < 400:
            raise FetchError(f"the server answered with a redirect ({status}), never followed")
        if status != 200:
            raise FetchError(f"the server answered {status}")
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[[[[..."
            raise FetchError("the document is not valid JSON") from None
        return FetchedJson(url, document, cache_lifetime(headers, time.time()))

    async def _get(self, url: str) -> tuple[int, Mapping[str, str], bytes]:
        try:
            async with self._client().stream("GET", url) as response:
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > self._max_bytes:
                    raise FetchError(f"the document is larger than {self._max_bytes} bytes")
                encoding = response.headers.get("content-encoding", "identity").lower()
                if encoding not in ("", "identity"):
                    raise FetchError("the document is compressed; send it uncompressed")
                chunks: list[bytes] = []
                total = 0
                if response.status_code == 200:
                    async for chunk in response.aiter_raw():
                        total += len(chunk)
                        if total > self._max_bytes:
                            raise FetchError(f"the document is larger than {self._max_bytes} bytes")
                        chunks.append(chunk)
                return response.status_code, response.headers, b"".join(chunks)
        except httpx.HTTPError as ex:
            raise FetchError(f"the request failed ({type(ex).__name__})") from None

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._own_resolver is not None:
            self._own_resolver.close()


# -- HTTP caching (RFC 9111 §4.2.1, §5.2, §5.3) ---------------------------------------

#: Reuse of a document that says nothing about caching, in seconds.
DEFAULT_TTL_S = 300.0
#: Longest reuse whatever the document says, in seconds.
MAX_TTL_S = 24 * 3600.0


def cache_lifetime(headers: Mapping[str, str], now: float) -> float:
    """Seconds a response may be reused: ``no-store``/``no-cache`` 0, else ``max-age``,
    else ``Expires`` - ``Date``, else :data:`DEFAULT_TTL_S`; never over :data:`MAX_TTL_S`."""
    directives = _cache_control(headers.get("cache-control", ""))
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    max_age = directives.get("max-age")
    if max_age is not None:
        try:
            return min(max(float(int(max_age)), 0.0), MAX_TTL_S)
        except ValueError:
            return 0.0  # RFC 9111 §4.2.1: an invalid max-age makes the response stale
    expires = headers.get("expires")
    if expires is not None:
        try:
            expires_at = parsedate_to_datetime(expires).timestamp()
        except (TypeError, ValueError):
            return 0.0  # RFC 9111 §5.3: an invalid date means "already expired"
        date = headers.get("date")
        try:
            base = parsedate_to_datetime(date).timestamp() if date else now
        except (TypeError, ValueError):
            base = now
        return min(max(expires_at - base, 0.0), MAX_TTL_S)
    return DEFAULT_TTL_S


def _cache_control(value: str) -> dict[str, str | None]:
    directives: dict[str, str | None] = {}
    for part in value.split(","):
        name, sep, arg = part.strip().partition("=")
        if name:
            directives[name.lower()] = arg.strip().strip('"') if sep else None
    return directives
