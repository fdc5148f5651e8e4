"""Shared fixtures: a randomly initialised transformers Qwen3 model and our model with the same weights."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

# The suite runs on the host CPU. libtpu (installed by the [test] extra for the TPU compile of
# tests/b2tjax/test_memory_plan_tpu.py) must not make JAX look for TPU chips in every test process.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Two pytest workers share CI's two cores, and most of a test's time is XLA:CPU compiling tiny
# programs: one compute thread per process (no oversubscription) and LLVM's quick code generation
# halve the suite's time (docs/results/suite-times.md). The subprocesses of the tests inherit them
# (tests/subprocess_env.py xla_flags). What a program computes does not depend on either.
SUITE_XLA_FLAGS = ("--xla_cpu_multi_thread_eigen=false", "--xla_backend_optimization_level=0")
_flags = os.environ.get("XLA_FLAGS", "").split()
os.environ["XLA_FLAGS"] = " ".join([*(f for f in SUITE_XLA_FLAGS if f not in _flags), *_flags])
os.environ.setdefault("OMP_NUM_THREADS", "1")  # torch's threads, for the same reason


def _build_pair(name: str, seed: int = 0, **overrides):
    import torch
    import transformers
    from flax import nnx

    from models.config import get_config
    from models.hf import state_dict_to_model
    from models.qwen3 import Qwen3ForCausalLM

    # A larger init than Qwen's 0.02 gives logits with real spread, so the checks can fail.
    cfg = dataclasses.replace(get_config(name), initializer_range=0.1, **overrides)
    torch.manual_seed(seed)
    hf_cfg = transformers.Qwen3Config(**cfg.to_hf())
    hf = transformers.Qwen3ForCausalLM(hf_cfg).eval()
    with torch.no_grad():  # random norm scales so q_norm/k_norm/final norm weights matter
        for pname, p in hf.named_parameters():
            if "norm" in pname:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    ours = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(seed + 1))
    state_dict_to_model(ours, hf.state_dict())
    return cfg, hf, ours


@pytest.fixture(scope="session")
def model_pair():
    """model_pair(name, seed=0, **overrides) -> (Qwen3Config, transformers model, our model); cached."""
    cache: dict = {}

    def get(name: str, seed: int = 0, **overrides):
        key = (name, seed, tuple(sorted(overrides.items())))
        if key not in cache:
            cache[key] = _build_pair(name, seed, **overrides)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def jax_cache(tmp_path_factory) -> Path:
    """One persistent compilation cache for the training subprocesses of a session (of an xdist
    worker): runs of one recipe in different files (its rollout, evaluation and checkpoint programs)
    compile each program once. A worker's own directory: no two processes write it at once."""
    return tmp_path_factory.mktemp("jax_cache")
