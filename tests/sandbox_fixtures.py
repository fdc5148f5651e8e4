"""Session fixtures for sandbox tests: the real small world and the evaluator's hand-made mini
world (the one the example plans are written against), each built once per test session.

Import a fixture into a test module with `from tests.sandbox_fixtures import small_world`; a module
that names it otherwise imports it under that name (`import mini_world as world`: pytest registers a
fixture by the name it has in the module).
"""

import pytest

_BUILT: dict = {}


def small_world_file(tmp_path_factory):
    """The small world store (seed 0, one worker), built once per session and shared by every
    fixture that needs it (a build is ~15 s on 2 cores); read it, never write it."""
    if "path" not in _BUILT:
        from sandbox.benchmarks.b2t.world.generator import build_world

        path = tmp_path_factory.mktemp("small_world") / "world.sqlite"
        build_world(path, scale="small", seed=0, workers=1)
        _BUILT["path"] = path
    return _BUILT["path"]


@pytest.fixture(scope="session")
def small_world_path(tmp_path_factory):
    """Path of a freshly generated small-scale world store (seed 0, built by one worker)."""
    return small_world_file(tmp_path_factory)


@pytest.fixture(scope="session")
def small_world(small_world_path):
    """The small world's tools (`b2t.B2TTools` over the store opened read-only with `b2t.open_world`)."""
    from sandbox.benchmarks import b2t

    return b2t.B2TTools(b2t.open_world(small_world_path))


@pytest.fixture(scope="session")
def mini_world(tmp_path_factory):
    """The evaluator's mini world store (sandbox/benchmarks/b2t/evaluator/example_store.py), opened."""
    from sandbox.benchmarks.b2t.evaluator.example_store import build_mini_world

    return build_mini_world(tmp_path_factory.mktemp("mini") / "world.sqlite")
