"""The one composition root: builds pools, brokers, providers and HTTP clients for every process.

- ``providers``: the embedder and the relation extractor, from the settings.
- ``database``: where the database is (DATABASE_URL or the embedded cluster), closed pools.
- ``web``: the web process (``WebProcess``: built up front, opened by the ASGI lifespan).
- ``asgi``: the uvicorn entry point, ``bootstrap.asgi:app``.
- ``serve``: ``ownsona serve`` (uvicorn with a bounded shutdown).
- ``stdio``: ``ownsona stdio`` (the web process's collaborators, MCP on stdin/stdout).
- ``worker``: Dramatiq workers and the Deps of their actors (``ownsona worker``,
  the in-process worker, ``ownsona reembed``'s workers).
- ``admin``: the database of the ``ownsona`` admin commands.
- ``logs``: logging for every process.

Only ``web``, ``asgi``, ``serve`` and ``stdio`` import ``api``, and nothing else does: a
worker or an admin command starts without the web package. Outside this
package only the ``ownsona`` command (``scripts``) and the tests import it.
"""
