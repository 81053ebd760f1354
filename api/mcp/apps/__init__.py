"""MCP Apps (SEP-1865, ``io.modelcontextprotocol/ui``): memory pages a host renders.

- ``extension``: whether a client offers the extension, and what we declare back;
- ``pages``: the ``ui://`` pages (HTML in ``pages/``, package data) and which tool
  shows which;
- ``resources``: ``resources/list`` and ``resources/read`` over those pages.

Only a client that offers the extension sees any of it (``api.mcp.dispatch``):
the others get today's capabilities, tool listing and methods, unchanged.
Tool results never change: a page reads the same ``structuredContent`` the model
does, and every action it offers is an ordinary ``tools/call`` the host forwards.
"""
