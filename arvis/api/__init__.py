"""HTTP adapter: the v1 routes and their request and response schemas."""
