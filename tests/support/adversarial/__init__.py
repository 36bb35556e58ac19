"""The adversarial suite's support (tests/adversarial/README.md): hostile stub upstreams,
the table of tool kinds, the table of entry points and the deployment they share.

- :mod:`.effects`: the file a stub appends one line to for every effect it performs.
- :mod:`.rawhttp`, :mod:`.loopthread`: an HTTP/1.1 server that can answer anything (or
  nothing, or a reset), on an event loop of its own.
- :mod:`.catalog`: the hostile modes and the tools the MCP stubs list.
- :mod:`.stubs`: the running stubs (an HTTP tool endpoint, an MCP server over streamable
  HTTP, and the command of one over stdio, ``stdio/hostile_server.py``).
- :mod:`.toolkinds`: ``TOOL_KINDS``, one row per tool kind.
- :mod:`.deployment`: one ARVIS over all of it, served in-process and per turn.
- :mod:`.entrypoints`: ``ENTRY_POINTS``, one row (a driver) per way in.
"""
