"""The ASGI entry point: ``uvicorn api.asgi:app``."""

from api.app import create_app
from api.logs import configure_logging
from config.settings import Settings

settings = Settings.from_env()
# uvicorn has set up its own text logging by now; ours replaces it (JSON, request ids).
configure_logging(settings)
app = create_app(settings)
