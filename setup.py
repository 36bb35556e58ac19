"""Packaging that pyproject.toml cannot say: the top-level ``migrations/`` folder
ships inside the wheel as the package ``arvis.migrations`` (DESIGN §9)."""

from setuptools import find_namespace_packages, setup

setup(
    # As pyproject's packages.find did: data folders (console/static, store/sql) are
    # namespace packages of arvis, so their files ship with it.
    packages=[
        *find_namespace_packages(include=["arvis", "arvis.*"]),
        *("arvis.migrations", "arvis.migrations.versions", "arvis.migrations.sql"),
    ],
    package_dir={"arvis.migrations": "migrations"},
    package_data={
        "arvis": ["py.typed", "store/sql/*.sql", "console/templates/*.html", "console/static/*"],
        "arvis.migrations": ["*.mako", "versions/*.py", "sql/*.sql", "sql/*/*.sql"],
    },
)
