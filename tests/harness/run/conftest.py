"""The MLflow tests of run/ (a sweep's runs, a store failing under it) share harness/track's
fixtures: a real SQLite store per module, no URI from the environment."""

from tests.harness.track.conftest import _no_env_uri, out_dir  # noqa: F401 - the fixtures
