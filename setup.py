"""Packaging that pyproject.toml cannot say: the top-level ``migrations/`` folder
ships inside the wheel as the package ``arvis.migrations`` (DESIGN §9)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["arvis", "arvis.*"]), "arvis.migrations"],
    package_dir={"arvis.migrations": "migrations"},
    package_data={
        "arvis": ["py.typed", "store/sql/*.sql", "console/templates/*.html", "console/static/*"],
        "arvis.migrations": ["*.mako", "versions/*.py", "sql/*.sql", "sql/*/*.sql"],
    },
)
