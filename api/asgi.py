"""The ASGI entry point: ``uvicorn api.asgi:app``."""

from api.app import create_app
from memory.settings import Settings

app = create_app(Settings.from_env())
