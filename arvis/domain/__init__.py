"""Pure types and rules: definitions, payload freezing, keys, boundaries, errors.

Nothing here imports a framework, the database, the environment or the wall clock.
"""
