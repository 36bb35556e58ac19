"""The schema's alembic revisions and their frozen SQL, shipped as ``arvis.migrations``.

The folder stands at the top of the repository (DESIGN §9); the wheel carries it
inside the package (setup.py maps it), so an installed ARVIS can migrate. Revisions
are history: a change to the schema is a new revision, never an edit of an old one.
"""
