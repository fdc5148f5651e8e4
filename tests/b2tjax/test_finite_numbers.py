"""No NaN or infinity is accepted where a number is read: every float knob of the training config
(enumerated from the schema), every number of a Hugging Face config.json, and a training step whose
loss is not finite stops the run in one line."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest

from b2tjax.config import TrainConfig, load_config
from b2tjax.errors import UserError
from models.config import Qwen3Config, get_config, with_rope_scaling
from models.fields import field_errors, field_types

ROOT = Path(__file__).resolve().parents[2]
NOT_FINITE = {".nan": "nan", ".inf": "inf", "-.inf": "-inf"}  # YAML -> how Python prints it


def _float_knobs(obj, prefix=""):
    """Every dotted key of a float field (`float` or `float | None`), nested sections included."""
    for f in dataclasses.fields(obj):
        value, hint = getattr(obj, f.name), field_types(type(obj))[f.name]
        if dataclasses.is_dataclass(value):
            yield from _float_knobs(value, f"{prefix}{f.name}.")
        elif hint is float or float in typing.get_args(hint):
            yield prefix + f.name


FLOAT_KNOBS = list(_float_knobs(TrainConfig()))


def test_the_float_knobs_are_found_in_the_schema():
    assert len(FLOAT_KNOBS) >= 25 and "optim.lr" in FLOAT_KNOBS and "rollout.temperature" in FLOAT_KNOBS


@pytest.mark.parametrize("key", FLOAT_KNOBS)
def test_nan_and_infinity_are_refused_for_every_float_knob(key):
    for bad, shown in NOT_FINITE.items():
        with pytest.raises(ValueError) as err:
            load_config(None, [f"{key}={bad}"])
        assert str(err.value) == f"{key}: expected a finite number, got {shown}"


def test_a_float_knob_set_in_code_is_checked_too():
    cfg = TrainConfig()
    cfg.optim.lr, cfg.rollout.temperature = math.nan, math.inf
    errors = field_errors(cfg)
    assert "optim.lr must be a finite number, got nan" in errors
    assert "rollout.temperature must be a finite number, got inf" in errors


def test_a_boolean_knob_takes_only_a_boolean():
    with pytest.raises(ValueError, match=r"^eval_at_end: expected true/false .*'false'$"):
        load_config(None, ["eval_at_end='false'"])
    assert load_config(None, ["eval_at_end=false"]).eval_at_end is False


def _numbers(tree, path=()):
    """(path, value) of every number (not bool) in a JSON tree."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _numbers(v, (*path, k))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield path, tree


def _with(tree: dict, path: tuple, value) -> dict:
    out = json.loads(json.dumps(tree))
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


# A YaRN config as transformers 4 writes it (rope_theta top-level) and one as 5 does (rope_parameters).
YARN = with_rope_scaling(get_config("tiny"), "yarn", 2.0, 64)
V5 = {k: v for k, v in YARN.to_hf().items() if k != "rope_scaling"}
V4 = {k: v for k, v in YARN.to_hf().items() if k != "rope_parameters"}
YARN_V4 = {**V4, "rope_scaling": {**V4["rope_scaling"], "attention_factor": 1.2, "beta_fast": 16.0}}


@pytest.mark.parametrize("hf", [V5, YARN_V4], ids=["v5", "v4"])
def test_every_number_of_a_hf_config_refuses_nan_and_infinity(hf):
    """Each number is refused in one line, or (a key the import does not read) changes nothing."""
    base = Qwen3Config.from_hf(hf)
    refused = 0
    for path, _ in _numbers(hf):
        for bad in (math.nan, math.inf, -math.inf):
            try:
                loaded = Qwen3Config.from_hf(_with(hf, path, bad))
            except ValueError as err:
                assert "\n" not in str(err) and path[-1] in str(err), (path, err)
                refused += 1
            else:
                assert loaded == base, (path, bad)
    assert refused >= 3 * 12  # the numbers read: sizes, rope_theta, rms_norm_eps, YaRN parameters


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("rms_norm_eps", -1, "rms_norm_eps must be > 0, got -1"),
        ("rope_theta", 0, "rope_theta must be > 0"),
        ("num_hidden_layers", 2.5, "num_hidden_layers: expected an integer, got 2.5"),
        ("tie_word_embeddings", "false", "tie_word_embeddings: expected true/false"),
    ],
)
def test_a_hf_config_number_out_of_range_or_of_the_wrong_type_is_one_line(tmp_path, key, value, message):
    (tmp_path / "config.json").write_text(json.dumps({**V4, key: value}))
    with pytest.raises(ValueError, match=message) as err:
        Qwen3Config.from_hf(tmp_path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("original_max_position_embeddings", 64.5, "expected an integer, got 64.5"),
        ("truncate", "false", "rope_scaling.truncate: expected true/false"),
        ("beta_fast", "NaN", "rope_scaling.beta_fast: expected a finite number"),
        ("beta_slow", -1.0, "beta_slow must be > 0"),
    ],
)
def test_yarn_parameters_are_typed_and_finite(tmp_path, key, value, message):
    text = json.dumps({**V4, "rope_scaling": {**V4["rope_scaling"], key: value}})
    (tmp_path / "config.json").write_text(text.replace('"NaN"', "NaN"))  # NaN as json.dumps writes it
    with pytest.raises(ValueError, match=message):
        Qwen3Config.from_hf(tmp_path)


@pytest.mark.slow  # one toy GRPO step
def test_a_step_whose_loss_is_not_finite_stops_the_run_in_one_line(tmp_path):
    """Broken weights (here a NaN final norm, as a corrupt checkpoint would hold) make the first
    step's loss NaN: the run stops there in one line instead of skipping on to "done"."""
    import jax.numpy as jnp

    from b2tjax.run.trainer import Trainer, build_model
    from b2tjax.tasks.toy import DigitTask

    cfg = load_config(
        ROOT / "configs" / "toy.yaml",
        [
            f"out={tmp_path}",
            "steps=2",
            "eval_at_end=false",
            "rollout.group_size=2",
            "checkpoint.every_steps=1",
        ],
    )
    model = build_model(cfg)
    model.norm.scale[...] = jnp.full_like(model.norm.scale[...], jnp.nan)
    trainer = Trainer(cfg, DigitTask(cfg.toy, cfg.rollout.temperature), model, progress=False)
    stops = r"^grpo step 1: loss nan.* is not finite; the update was not applied"
    with pytest.raises(UserError, match=stops) as err:
        trainer.run()
    assert "\n" not in str(err.value)
    assert not (tmp_path / "checkpoints" / "1").exists()  # the step is not saved


def test_number_flags_of_the_launch_scripts_refuse_nan_and_infinity():
    """`--grace nan` once made the cluster launcher's kill deadline a comparison that never holds."""
    from models.fields import finite_float

    assert finite_float("2.5") == 2.5
    for bad in ("nan", "inf", "-inf", "1e999", "x"):
        with pytest.raises(ValueError):
            finite_float(bad)
