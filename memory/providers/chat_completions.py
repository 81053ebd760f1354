"""One JSON question to an OpenAI-compatible ``/chat/completions`` endpoint.

Shared by the LLM extractors (relations, a chat import's facts): the wire
format, ``response_format: json_object`` with a fallback for servers that
refuse it (LM Studio, older vLLM: the prompt still asks for JSON), the bearer
key, timeouts, and reading ``choices[0].message.content``. Failures raise
:class:`ChatCompletionError`, whose message holds no prompt text and no key;
each extractor turns it into its own error type.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

#: Builds a client per call when no shared one is given (closed when the call ends).
ClientFactory = Callable[[], httpx.AsyncClient]
#: Seconds one chat-completions request may take (connect, read, write, pool).
LLM_TIMEOUT_S = 60.0


class ChatCompletionError(Exception):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ChatCompletions:
    """``POST {base_url}/chat/completions`` with one system and one user message."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float,
        client: httpx.AsyncClient | ClientFactory,
    ) -> None:
        """``client``: a shared ``httpx.AsyncClient`` (never closed here), or a factory."""
        self.model = model
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout_s)
        self._client = client
        #: False after the server refused ``response_format``: ask in the prompt only.
        self.json_mode = True

    async def ask(self, system: str, user: str) -> str:
        """The answer's text content."""
        if isinstance(self._client, httpx.AsyncClient):
            return await self._ask(self._client, system, user)
        async with self._client() as client:
            return await self._ask(client, system, user)

    async def _ask(self, client: httpx.AsyncClient, system: str, user: str) -> str:
        response = await self._post(client, system, user)
        if response.status_code == 400 and self.json_mode and "response_format" in response.text:
            self.json_mode = False
            response = await self._post(client, system, user)
        if not 200 <= response.status_code < 300:
            raise ChatCompletionError(
                f"the LLM endpoint answered HTTP {response.status_code}",
                status=response.status_code,
            )
        return _content(response)

    async def _post(self, client: httpx.AsyncClient, system: str, user: str) -> httpx.Response:
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            return await client.post(self.url, json=body, headers=headers, timeout=self._timeout)
        except httpx.TimeoutException as ex:
            raise ChatCompletionError("the LLM endpoint timed out") from ex
        except httpx.HTTPError as ex:
            raise ChatCompletionError(
                f"the LLM endpoint could not be reached ({type(ex).__name__})"
            ) from ex


def _content(response: httpx.Response) -> str:
    """``choices[0].message.content`` of a chat-completions answer."""
    try:
        data = response.json()
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as ex:
        raise ChatCompletionError("the LLM answer is not a chat completion") from ex
    if not isinstance(content, str):
        raise ChatCompletionError("the LLM answer has no text content")
    return content


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S | re.I)


def unfenced(content: str) -> str:
    """The answer without a Markdown code fence around it (models add one despite JSON mode)."""
    fenced = _FENCE.match(content)
    return fenced.group(1) if fenced else content.strip()


class ChatModelProvider:
    """A provider that asks one chat model (the LLM extractors); its repr never shows the key."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = LLM_TIMEOUT_S,
        client: httpx.AsyncClient | ClientFactory,
    ) -> None:
        """``client``: a shared ``httpx.AsyncClient`` (never closed here), or a factory.

        With a factory each call opens its own client and closes it when the
        call ends. Both come from the composition root (``bootstrap.providers``).
        """
        self.model = model
        self._llm = ChatCompletions(
            base_url=base_url, model=model, api_key=api_key, timeout_s=timeout_s, client=client
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._llm.url!r}, model={self.model!r})"
