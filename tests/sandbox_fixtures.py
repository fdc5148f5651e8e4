"""Session fixtures for sandbox tests: the real small world and the evaluator's hand-made mini
world (the one the example plans are written against), each built once per test session.

Import a fixture into a test module with `from tests.sandbox_fixtures import small_world`; a module
that names it otherwise imports it under that name (`import mini_world as world`: pytest registers a
fixture by the name it has in the module).
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
    """The small world opened read-only with `b2t.open_world`."""
    from sandbox.benchmarks import b2t

    return b2t.open_world(small_world_path)


@pytest.fixture(scope="session")
def mini_world(tmp_path_factory):
    """The evaluator's mini world store (sandbox/benchmarks/b2t/evaluator/example_store.py), opened."""
    from sandbox.benchmarks.b2t.evaluator.example_store import build_mini_world

    return build_mini_world(tmp_path_factory.mktemp("mini") / "world.sqlite")
