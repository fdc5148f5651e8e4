"""Config values are checked when the config loads, with the key and the allowed range."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from b2tjax.config import dump_config, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "override, expected",
    [
        ("steps=-3", "steps must be >= 0, got -3"),
        ("sft.steps=-5", "sft.steps must be >= 0, got -5"),
        ("optim.lr=-1", "optim.lr must be > 0, got -1.0"),
        ("sft.optim.lr=0", "sft.optim.lr must be > 0, got 0.0"),
        ("rollout.max_seq_len=-1", "rollout.max_seq_len must be >= 2, got -1"),
        ("sft.max_seq_len=-1", "sft.max_seq_len must be >= 2, got -1"),
        ("rollout.top_p=7", "rollout.top_p must be in (0, 1], got 7.0"),
        ("rollout.segment_return_share=0", "rollout.segment_return_share must be in (0, 1], got 0.0"),
        ("sft.batch_size=0", "sft.batch_size must be >= 1, got 0"),
        ("grpo.mini_batches=0", "grpo.mini_batches must be >= 1, got 0"),
        ("rollout.max_prompt_tokens=5000", "rollout.max_prompt_tokens must be < rollout.max_seq_len (1024)"),
        ("mesh.rollout_devices=-1", "mesh.rollout_devices must be >= 0, got -1"),
    ],
)
def test_out_of_range_values_are_rejected(override, expected):
    with pytest.raises(ValueError) as info:
        load_config(None, [override])
    assert expected in str(info.value)


def test_decoding_during_the_update_needs_streaming():
    with pytest.raises(ValueError) as info:
        load_config(None, ["rollout.decode_during_update=true"])
    assert "rollout.decode_during_update=true needs rollout.max_staleness >= 1" in str(info.value)
    during = load_config(None, ["rollout.decode_during_update=true", "rollout.max_staleness=1"])
    assert during.rollout.decode_during_update


def test_the_split_placement_refuses_lora_in_one_line():
    with pytest.raises(ValueError) as info:
        load_config(None, ["mesh.rollout_devices=2", "model.lora.rank=4"])
    assert "mesh.rollout_devices > 0 needs full fine-tuning (model.lora.rank=0)" in str(info.value)
    assert load_config(None, ["mesh.rollout_devices=2"]).mesh.rollout_devices == 2


def test_every_recipe_loads_back_from_the_config_a_run_saves(tmp_path):
    """launch/train.py saves OUT/config.yaml (dump_config): loading it gives the recipe's config."""
    for recipe in sorted((ROOT / "configs").glob("*.yaml")):
        cfg = load_config(recipe)
        dump_config(cfg, tmp_path / "config.yaml")
        assert load_config(tmp_path / "config.yaml") == cfg, recipe.name


# Every range main checked before the ranges moved into the annotations (config/checks.py's
# _RANGES and _batch_errors, rollout/config.py's _AT_LEAST), written out here: none may be lost.
RANGES_OF_BEFORE = [
    *[(k, ">= 0") for k in ("steps", "sft.steps", "sft.micro_batch_size", "sft.max_examples")],
    *[(k, ">= 0") for k in ("grpo.micro_batch_size", "grpo.fixed_length", "grpo.local_weight")],
    *[(k, ">= 0") for k in ("data.max_train_instances", "data.eval_instances", "hardware.hbm_gib")],
    *[(k, ">= 0") for k in ("grpo.clip_low", "grpo.clip_high", "grpo.beta")],
    *[(k, ">= 1") for k in ("sft.batch_size", "log_every", "grpo.logprob_chunk", "grpo.mini_batches")],
    *[(k, ">= 1") for k in ("grpo.epochs", "hardware.devices", "checkpoint.every_steps", "checkpoint.keep")],
    ("sft.max_seq_len", ">= 2"),
    ("grpo.adv_eps", "> 0"),
    ("model.sp_vocab_size", ">= 64"),
    *[(f"{s}lr", "> 0") for s in ("optim.", "sft.optim.")],
    *[(f"{s}eps", "> 0") for s in ("optim.", "sft.optim.")],
    *[(f"{s}max_grad_norm", "> 0") for s in ("optim.", "sft.optim.")],
    *[(f"{s}warmup_steps", ">= 0") for s in ("optim.", "sft.optim.")],
    *[(f"{s}weight_decay", ">= 0") for s in ("optim.", "sft.optim.")],
    *[(f"{s}final_lr_ratio", "in [0, 1]") for s in ("optim.", "sft.optim.")],
    *[(f"{s}{b}", "in [0, 1)") for s in ("optim.", "sft.optim.") for b in ("b1", "b2")],
    *[(f"rollout.{k}", ">= 1") for k in ("group_size", "prompts_per_step", "max_turns", "max_turn_tokens")],
    *[(f"rollout.{k}", ">= 1") for k in ("max_response_chars", "batch_rows", "prefill_chunk")],
    *[(f"rollout.{k}", ">= 1") for k in ("prefill_min_bucket", "prefix_min_tokens", "tool_workers")],
    *[(f"rollout.{k}", ">= 0") for k in ("max_prompt_tokens", "top_k", "cache_len")],
    ("rollout.max_seq_len", ">= 2"),
    *[(f"rollout.{k}", "in (0, 1]") for k in ("top_p", "segment_return_share")],
]


def _just_outside(allowed: str) -> float:
    """A value just outside the range written `allowed`."""
    if allowed.startswith("in "):
        low, high = allowed[4:-1].split(", ")
        return float(high) + (0 if allowed.endswith(")") else 0.5)
    bound = float(allowed.split()[-1])
    return bound if allowed.startswith("> ") else bound - 1


@pytest.mark.parametrize("key, allowed", RANGES_OF_BEFORE)
def test_every_range_of_before_is_still_checked(key, allowed):
    bad = _just_outside(allowed)
    with pytest.raises(ValueError) as info:
        load_config(None, [f"{key}={bad}"])
    if key == "rollout.group_size":  # GRPO's tighter bound is the one line said
        allowed = ">= 2"
    assert f"{key} must be {allowed}, got " in str(info.value)


@pytest.mark.slow
def test_overrides_on_both_sides_of_options(tmp_path):
    """`steps=-3 --out X sft.steps=-5`: both overrides reach the config (and both are reported)."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch" / "train.py"),
            "steps=-3",
            "--out",
            str(tmp_path / "run"),
            "sft.steps=-5",
            "--no-progress",
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "steps must be >= 0, got -3" in result.stderr and "sft.steps must be >= 0, got -5" in result.stderr


# Every choice field of the config, a value outside it, and its allowed values written out here.
CHOICES = [
    ("task", "chess", "travel, toy"),
    ("mode", "rl", "sft_grpo, grpo, sft_only, eval"),
    ("model.remat", "some", "none, full, dots, dots_all"),
    ("model.compute_dtype", "float16", "float32, bfloat16"),
    ("model.param_dtype", "int8", "float32, bfloat16"),
    ("grpo.aggregation", "mean_of_means", "seq_mean_token_mean, token_mean, fixed_length"),
    ("rollout.turn_cap", "cut", "stop, close"),
    ("rollout.prompt_style", "cot", "tool_agent, react"),
    ("rollout.python_tool_isolation", "none", "full, unsafe-ok"),
    ("rollout.cache_dtype", "fp8", "auto, float32, bfloat16"),
]


@pytest.mark.parametrize("key, bad, allowed", CHOICES)
def test_a_bad_choice_is_one_line_listing_the_allowed_values(tmp_path, key, bad, allowed):
    expected = f"{key} must be one of {allowed}; got {bad!r}"
    with pytest.raises(ValueError) as override:
        load_config(None, [f"{key}={bad}"])
    assert str(override.value) == expected
    *sections, name = key.split(".")
    path = tmp_path / "recipe.yaml"
    path.write_text(
        "".join(f"{'  ' * i}{s}:\n" for i, s in enumerate(sections))
        + f"{'  ' * len(sections)}{name}: {bad}\n"
    )
    with pytest.raises(ValueError) as from_yaml:
        load_config(path)
    assert str(from_yaml.value) == f"{path}: {expected}"


def test_an_unknown_benchmark_lists_the_registered_ones():
    with pytest.raises(ValueError) as info:
        load_config(None, ["benchmark=webshop"])
    lines = str(info.value).splitlines()
    assert lines[1:] == ["  unknown benchmark 'webshop'; choose from b2t, travelplanner"]


def test_a_direct_rollout_config_checks_its_choices_and_ranges():
    from rollout.config import RolloutConfig

    with pytest.raises(ValueError, match="turn_cap must be one of stop, close; got 'cut'"):
        RolloutConfig(turn_cap="cut")
    with pytest.raises(ValueError, match=r"cache_len \(100\) must be 0 or >= max_seq_len \(1024\)"):
        RolloutConfig(cache_len=100)
    with pytest.raises(ValueError, match="tool_workers must be >= 1, got 0"):
        RolloutConfig(tool_workers=0)


# A value for every knob of rollout.config.RolloutConfig, none of them its default.
EVERY_KNOB = {
    "group_size": 3,
    "prompts_per_step": 5,
    "max_turns": 7,
    "max_turn_tokens": 33,
    "max_seq_len": 900,
    "max_prompt_tokens": 500,
    "turn_cap": "close",
    "max_response_chars": 1234,
    "prompt_style": "react",
    "memory_enabled": False,
    "python_tool": True,
    "python_tool_isolation": "unsafe-ok",
    "context_budget": 800,
    "context_keep_turns": 3,
    "temperature": 0.7,
    "top_p": 0.9,
    "top_k": 40,
    "batch_rows": 6,
    "cache_len": 1024,
    "cache_dtype": "bfloat16",
    "prefill_chunk": 128,
    "prefill_min_bucket": 32,
    "prefix_reuse": False,
    "prefix_min_tokens": 64,
    "tool_workers": 3,
    "segment_return_share": 0.5,
    "page_size": 32,
    "kv_pages": 200,  # >= 1024 / 32 pages: one whole stream
    "paged_attention": "gather",
    "max_staleness": 1,
    "resume_kv": "recompute",
    "decode_during_update": True,
    "router_replay": "replay",
}


def _knobs(config) -> dict:
    return {name: getattr(config, name) for name in EVERY_KNOB}


@pytest.mark.slow
def test_every_rollout_knob_reaches_the_trainers_engine_from_yaml(tmp_path):
    """YAML `rollout:` -> TrainConfig.rollout -> the task's spec -> the engine its sampler builds, knob
    for knob."""
    import dataclasses

    import yaml
    from flax import nnx

    from b2tjax.run.task_build import task_spec
    from b2tjax.tasks.toy_tools import lookup_tokenizer
    from models.config import get_config
    from models.moe_config import MoeConfig
    from models.qwen3 import Qwen3ForCausalLM
    from rollout.config import RolloutConfig
    from rollout.sampler import Sampler

    assert set(EVERY_KNOB) == {f.name for f in dataclasses.fields(RolloutConfig)}, "a knob is missing here"
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"rollout": EVERY_KNOB}))
    cfg = load_config(path)
    assert _knobs(cfg.rollout) == EVERY_KNOB
    tokenizer = lookup_tokenizer(4, 4)
    moe = MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)  # router_replay's
    model_cfg = dataclasses.replace(get_config("tiny"), vocab_size=tokenizer.vocab_size, moe=moe)
    model = Qwen3ForCausalLM(model_cfg, rngs=nnx.Rngs(0))
    spec = task_spec(cfg)
    greedy = dataclasses.replace(spec.rollout, temperature=0.0)  # the evaluation's, as BenchmarkTask asks
    engine = Sampler(tokenizer, spec.mesh).engine_for(model, greedy)
    assert _knobs(engine.config) == {**EVERY_KNOB, "temperature": 0.0}
    assert str(engine.cache_dtype) == "bfloat16"
    assert cfg.cache_len == 1024 and cfg.cache_dtype == "bfloat16"  # what the memory plan counts


def test_launch_rollouts_reads_the_recipe_then_flags_then_overrides(tmp_path):
    import yaml

    from b2tjax.run.policy import ROLLOUT_DEFAULTS
    from launch.rollouts import parse_args, rollout_config

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"rollout": EVERY_KNOB}))
    base = ["--model", "tiny", "--data", str(tmp_path), "--out", str(tmp_path / "r.jsonl")]
    assert _knobs(rollout_config(parse_args([*base, "--config", str(path)]))) == EVERY_KNOB
    args = parse_args(["rollout.top_k=5", *base, "--config", str(path), "--top-k", "3", "--batch-size", "2"])
    assert _knobs(rollout_config(args)) == {**EVERY_KNOB, "top_k": 5, "batch_rows": 2}
    plain = rollout_config(parse_args([*base, "--max-total-tokens", "2048", "--variant", "react"]))
    assert (plain.max_seq_len, plain.prompt_style, plain.max_turn_tokens) == (2048, "react", 1024)
    assert plain.batch_rows == ROLLOUT_DEFAULTS.batch_rows == 8


@pytest.mark.slow
def test_launch_rollouts_rejects_a_bad_knob_in_one_line(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch" / "rollouts.py"),
            "--model",
            "tiny",
            "--data",
            str(tmp_path),
            "--out",
            str(tmp_path / "r.jsonl"),
            "rollout.turn_cap=cut",
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.strip().splitlines()[-1]
        == "error: rollout.turn_cap must be one of stop, close; got 'cut'"
    )
