pytest_plugins = ["tests.support.postgres", "tests.support.wheel", "tests.support.oidc"]
