"""`rollout.paged_attention` (auto | gather | kernel) reaches the sampler's graph: the engine's
ModelRunner reads a paged cache by the recipe's choice (models/layers.py `with_paged_attention`,
on a shell over the trainer's arrays, whose own graph is left as it is), and launch/plan.py's
abstract model carries it into the programs it compiles. That "gather" compiles a TPU decode
without the Mosaic kernel and "auto" with it: tests/b2tjax/test_paged_decode_tpu.py (slow)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from flax import nnx

from models.config import get_config
from models.layers import Attention, with_paged_attention
from models.paged_kernel import PAGED_ATTENTION_IMPLS
from models.qwen3 import Qwen3ForCausalLM
from rollout.config import PagedAttention, RolloutConfig
from rollout.programs import ModelRunner

ROOT = Path(__file__).resolve().parents[2]


def _impls(model: nnx.Module) -> set[str]:
    return {m.paged_attention for _, m in nnx.iter_modules(model) if isinstance(m, Attention)}


def test_the_config_choices_are_the_models():
    assert get_args(PagedAttention) == PAGED_ATTENTION_IMPLS
    assert RolloutConfig().paged_attention == "auto"
    with pytest.raises(ValueError, match="paged_attention"):
        RolloutConfig(paged_attention="flash")


def test_with_paged_attention_sets_a_shell_and_leaves_the_model():
    model = Qwen3ForCausalLM(get_config("tiny"), rngs=nnx.Rngs(0))
    assert _impls(model) == {"auto"}
    assert with_paged_attention(model, "auto") is model
    shell = with_paged_attention(model, "gather")
    assert _impls(shell) == {"gather"} and _impls(model) == {"auto"}
    assert shell.embed.embedding[...] is model.embed.embedding[...]  # the same arrays, no copy
    with pytest.raises(ValueError, match="unknown paged attention"):
        with_paged_attention(model, "flash")


def test_the_sampler_graph_takes_the_rollout_choice():
    model = Qwen3ForCausalLM(get_config("tiny"), rngs=nnx.Rngs(0))
    runner = ModelRunner(model, paged_attention="kernel")
    assert _impls(nnx.merge(runner.graphdef, runner.state)) == {"kernel"}
    assert _impls(nnx.merge(ModelRunner(model).graphdef, runner.state)) == {"auto"}


def test_the_plan_model_takes_the_rollout_choice():
    from b2tjax.config import load_config
    from b2tjax.run.adapters import abstract_run_model
    from models.config import get_config as preset

    cfg = load_config(ROOT / "configs" / "tiny_cpu.yaml", ["rollout.paged_attention=gather"])
    model = abstract_run_model(cfg, preset(cfg.model.preset, **dict(cfg.model.overrides)))
    assert _impls(model) == {"gather"}
