"""What every console resource is built with: one object, made by ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from api.console.jobs import Jobs
from api.console.render import Renderer
from api.console.tools import ConsoleTools
from api.runtime import Runtime
from auth.sessions import Sessions
from auth.throttle import LoginGuard
from config.settings import Settings


@dataclass
class ConsoleServices:
    settings: Settings
    runtime: Runtime
    #: For the ``auth`` use cases (accounts, tokens), which take the pool.
    pool: AsyncConnectionPool
    renderer: Renderer
    tools: ConsoleTools
    sessions: Sessions
    #: The sign-in throttle the OAuth login page uses: one budget for both forms.
    login_guard: LoginGuard
    jobs: Jobs
