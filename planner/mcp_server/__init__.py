"""The MCP server of docs/domain.md: coding agents read the plan and knowledge and ask questions.

``tools.py`` says which tools there are and runs a call as the token's user;
``app.py`` is the ASGI side (the SDK's Streamable HTTP transport behind token
authentication and the per-token request limit), mounted at ``/mcp`` in
``ballet/asgi.py``.
"""
