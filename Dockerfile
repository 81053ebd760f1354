# OwnSona's image: the web process by default; `ownsona worker` and `ownsona migrate` run from
# the same image (see docker-compose.yml). The local embedding model (all-MiniLM-L6-v2 int8
# ONNX) comes inside the image from the PyPI packages: nothing is downloaded at run time.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/ownsona/bin:$PATH \
    HF_HUB_OFFLINE=1

WORKDIR /app

# Dependencies first, from pyproject.toml alone: this layer is rebuilt only when they change.
COPY pyproject.toml README.md ./
RUN python -m venv /opt/ownsona \
 && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install --requirement /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The application itself.
COPY api ./api
COPY auth ./auth
COPY bootstrap ./bootstrap
COPY config ./config
COPY memory ./memory
COPY storage ./storage
COPY tasks ./tasks
COPY scripts ./scripts
COPY sealing ./sealing
COPY Procfile ./
RUN pip install --no-deps . \
 && python -c "import asyncio; from memory.providers.embedders import LocalEmbedder; print('local model:', asyncio.run(LocalEmbedder.bundled().ensure_ready()), 'dimensions')" \
 && useradd --system --uid 10001 --create-home --home-dir /home/ownsona ownsona

# Never root at run time.
USER 10001
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('PORT', '8000'), timeout=4)"]

# The Procfile's web line (bootstrap.asgi, the web process's entry point); PORT and WEB_CONCURRENCY come from the environment.
CMD ["sh", "-c", "exec uvicorn bootstrap.asgi:app --host 0.0.0.0 --port ${PORT:-8000} --workers ${WEB_CONCURRENCY:-1} --lifespan on --forwarded-allow-ips \"${FORWARDED_ALLOW_IPS:-}\" --timeout-graceful-shutdown ${SHUTDOWN_TIMEOUT:-20}"]
