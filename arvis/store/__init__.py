"""PostgreSQL adapter: tables, one operation per lifecycle step, the server-side
functions they call, embedded PostgreSQL."""
