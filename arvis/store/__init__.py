"""PostgreSQL adapter: tables, repositories, the unit of work, embedded PostgreSQL."""
