"""Session fixtures for sandbox tests: the real small world, built once per test session.

Import the fixture into a test module with `from tests.sandbox_fixtures import small_world`.
"""

import pytest


@pytest.fixture(scope="session")
def small_world_path(tmp_path_factory):
    """Path of a freshly generated small-scale world store (seed 0)."""
    from sandbox.benchmarks.b2t.world.generator import build_world

    path = tmp_path_factory.mktemp("small_world") / "world.sqlite"
    build_world(path, scale="small", seed=0)
    return path


@pytest.fixture(scope="session")
def small_world(small_world_path):
    """The small world's tools (`b2t.B2TTools` over the store opened read-only with `b2t.open_world`)."""
    from sandbox.benchmarks import b2t

    return b2t.B2TTools(b2t.open_world(small_world_path))
