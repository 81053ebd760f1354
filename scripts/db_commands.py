"""``ownsona db status`` and ``ownsona db stop``: the embedded PostgreSQL of OWNSONA_DATA_DIR.

The cluster normally stops by itself when the last OwnSona process using it
exits (``storage.embedded``); these commands look at it, and stop one left
running (a process killed with SIGKILL cannot stop it). Neither starts it.
"""

from __future__ import annotations

import argparse
from typing import Any

from config.settings import Settings


def add_parsers(sub: Any) -> None:
    """Add the ``db`` subcommand to the ``ownsona`` parser."""
    db = sub.add_parser("db", help="the embedded PostgreSQL: status, stop")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    db_sub.add_parser(
        "status",
        help="whether the embedded cluster runs, where, and which OwnSona processes use it",
    )
    stop = db_sub.add_parser(
        "stop", help="stop the embedded cluster (refused while OwnSona processes use it)"
    )
    stop.add_argument(
        "--force", action="store_true", help="stop it even so; those processes lose the database"
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Run ``db status`` or ``db stop``; the exit status (1: stop refused)."""
    from bootstrap.admin import cluster_status, stop_embedded_now

    data_dir = settings.data_dir
    if settings.database_url:
        print("note: DATABASE_URL is set; OwnSona does not use the embedded cluster below")
    status = cluster_status(data_dir)
    if args.db_command == "status":
        print(f"embedded PostgreSQL: {'running' if status.running else 'not running'}")
        print(f"  data directory: {data_dir / 'pg'}")
        if status.running:
            print(f"  port: {status.port} (Unix socket in {status.socket_dir}; no TCP)")
        if status.users:
            for user in status.users:
                print(f"  used by: pid {user.pid} ({user.command})")
        else:
            print("  used by: no OwnSona process")
            if status.running:
                # Left by a process that could not stop it (SIGKILL, a second Ctrl-C).
                print("  nothing of OwnSona uses it: `ownsona db stop` stops it")
        return 0
    if not status.running:
        print(f"embedded PostgreSQL in {data_dir / 'pg'} is not running")
        return 0
    if status.users and not args.force:
        pids = ", ".join(f"{u.pid} ({u.command})" for u in status.users)
        print(f"not stopped: OwnSona processes use it: {pids}; stop them first, or use --force")
        return 1
    stop_embedded_now(data_dir)
    print(f"stopped the embedded PostgreSQL in {data_dir / 'pg'}")
    return 0
