"""Console page module (to be built): see api/console/routes.py."""

from __future__ import annotations

from api.console.services import ConsoleServices


def routes(services: ConsoleServices) -> list[tuple[str, object]]:
    return []
