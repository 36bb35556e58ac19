"""What every HTTP adapter shares (DESIGN §9): who is calling, problem responses,
metrics, middleware, JSON logs and trace context. ``api``, ``mcp`` and ``console``
import this package, never one another."""
