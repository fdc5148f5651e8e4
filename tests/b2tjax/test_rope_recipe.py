"""`model.rope_scaling` of a recipe reaches the model a run builds and the one its memory plan
compiles: random inits and hf: checkpoints alike."""

from __future__ import annotations

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from b2tjax.config import load_config
from b2tjax.errors import UserError
from b2tjax.plan.memory_plan import plan_model_config
from b2tjax.run.model_build import build_model
from models.config import get_config
from models.rope import RopeScaling

YARN = ["model.rope_scaling.kind=yarn", "model.rope_scaling.factor=2"]


def test_random_init_and_its_plan_get_the_recipe_scaling():
    cfg = load_config(None, ["task=toy", *YARN])
    model = build_model(cfg, vocab_size=16)
    want = RopeScaling("yarn", 2.0, get_config("tiny").max_position_embeddings)
    assert model.config.rope_scaling == want and model.config.max_position_embeddings == 8192
    assert model.layers.attn.rope_scaling == want  # what the rotation reads, uncached and cached
    assert plan_model_config(cfg).rope_scaling == want
    assert build_model(load_config(None, ["task=toy"]), 16).config.rope_scaling == RopeScaling()


def test_hf_checkpoint_without_scaling_gets_yarn_and_equals_transformers(model_pair, tmp_path):
    cfg, hf, _ = model_pair("tiny")
    hf.save_pretrained(tmp_path / "hf")
    run = load_config(None, ["task=toy", f"model.init=hf:{tmp_path / 'hf'}", *YARN])
    model = build_model(run)
    assert plan_model_config(run) == model.config
    assert model.config.rope_scaling == RopeScaling("yarn", 2.0, cfg.max_position_embeddings)
    # transformers with the same YaRN settings on the same weights.
    scaled = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**model.config.to_hf())).eval()
    scaled.load_state_dict(hf.state_dict())
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (1, 128), dtype=np.int32)
    with torch.no_grad():
        expected = scaled(torch.from_numpy(ids).long()).logits.numpy()
    got = np.asarray(nnx.jit(lambda m, x: m(x))(model, jnp.asarray(ids)))
    assert np.abs(got - expected).max() < 1e-5


def test_a_checkpoint_with_other_scaling_is_refused_in_one_line(model_pair, tmp_path):
    cfg, hf, _ = model_pair("tiny")
    own = dataclasses.replace(cfg, rope_scaling=RopeScaling("yarn", 4.0, 1024), max_position_embeddings=4096)
    hf.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "config.json").write_text(json.dumps(own.to_hf()))
    init = f"model.init=hf:{tmp_path / 'hf'}"
    run = load_config(None, ["task=toy", init, *YARN])
    for build in (build_model, plan_model_config):
        with pytest.raises(UserError, match=r"^model.rope_scaling: .* conflicts .* own yarn x4 over 1024$"):
            build(run)
    rope = ["model.rope_scaling.factor=4", "model.rope_scaling.original_max_positions=1024"]
    same = load_config(None, ["task=toy", init, YARN[0], *rope])
    assert build_model(same).config == own  # the checkpoint's own scaling again: fine
