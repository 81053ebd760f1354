"""``ownsona stdio``: an MCP server on standard input/output, for one user.

For clients that launch local commands instead of connecting to a URL
(Claude Desktop's local configuration, editors): the same tools over the
same store and write queue as ``ownsona serve``; see ``bootstrap.stdio``
and docs/clients.md, "A local client over standard input/output". Standard output carries MCP
messages only, from the first byte: it is claimed before anything else runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from config.settings import Settings


def add_parser(sub: Any) -> None:
    """Add the ``stdio`` subcommand to the ``ownsona`` parser."""
    stdio = sub.add_parser(
        "stdio",
        help="serve MCP on stdin/stdout for one user (local clients such as Claude Desktop)",
    )
    stdio.add_argument(
        "--user",
        help="the account whose memories are served (default: the login account, "
        "$OWNSONA_LOGIN_USERNAME or owner)",
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Serve until end of input or SIGTERM; the exit status (0 after a clean shutdown)."""
    from bootstrap.stdio import claim_stdout, run_stdio

    out = claim_stdout()
    return run_stdio(settings, args.user, out)
