"""HTTP adapter: the FastAPI app, routes, identity and problem responses."""
