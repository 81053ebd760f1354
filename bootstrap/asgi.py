"""The ASGI entry point: ``uvicorn bootstrap.asgi:app`` (the Procfile's and the image's web line).

The collaborators are built here, at import, and connect to nothing until
the ASGI lifespan opens them (``bootstrap.web.WebProcess``).
"""

from api.app import create_app
from config.settings import Settings

from .logs import configure_logging
from .web import WebProcess

settings = Settings.from_env()
# uvicorn has set up its own text logging by now; ours replaces it (JSON, request ids).
configure_logging(settings)
web = WebProcess(settings)
app = create_app(settings, runtime=web.runtime, lifespan=web)
