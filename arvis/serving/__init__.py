"""The ASGI app (DESIGN §9): mounts the v1 routes, ``/mcp`` and ``/console`` on one
kernel, owns the uvicorn settings and the syscall fast lane. Only this package and
the composition root see every adapter."""
