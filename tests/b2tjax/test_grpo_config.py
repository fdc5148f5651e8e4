"""Training config: YAML recipes load, overrides apply with types checked, bad input is a clear error."""

from pathlib import Path

import pytest

from b2tjax.config import TrainConfig, apply_overrides, config_from_dict, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_recipe_loads_and_round_trips(path):
    cfg = load_config(path)
    assert config_from_dict(cfg.to_dict()) == cfg


def test_qwen3_recipes_state_hardware_and_use_bf16():
    for path in sorted((ROOT / "configs").glob("*qwen3_*.yaml")):  # himap_qwen3_* too
        text = path.read_text()
        assert "Hardware" in text and "Mesh:" in text, path.name
        cfg = load_config(path)
        # the machine launch/plan.py checks the recipe against
        assert cfg.hardware.devices >= 1 and cfg.hardware.hbm_gib > 0, path.name
        assert cfg.model.compute_dtype == "bfloat16" and cfg.model.param_dtype == "float32"
        assert cfg.model.preset.startswith("qwen3-")


def test_overrides_are_typed():
    cfg = load_config(
        None,
        [
            "optim.lr=1e-6",
            "rollout.group_size=8",
            "grpo.loss_mask=false",
            "model.overrides={num_hidden_layers: 4}",
            "data.difficulties=[hard]",
        ],
    )
    assert cfg.optim.lr == 1e-6 and isinstance(cfg.optim.lr, float)  # YAML reads "1e-6" as a string
    assert cfg.rollout.group_size == 8 and cfg.grpo.loss_mask is False
    assert cfg.model.overrides == {"num_hidden_layers": 4} and cfg.data.difficulties == ["hard"]


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.learning_rate=1", "unknown config key 'optim.learning_rate'"),
        ("rollout.group_size=many", "rollout.group_size: expected an integer"),
        ("rollout.group_size=1", "group_size must be >= 2"),
        ("grpo.aggregation=mean_of_means", "grpo.aggregation must be one of"),
        ("grpo.loss_mask=maybe", "grpo.loss_mask: expected true/false"),
        ("rollout", "not of the form key=value"),
        ("grpo.mini_batches=3", "must divide into grpo.mini_batches"),
    ],
)
def test_bad_overrides_name_the_problem(override, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_config(None, [override])


def test_unknown_key_in_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("grpo:\n  betta: 0.1\n")
    with pytest.raises(ValueError, match="bad.yaml: unknown config key 'grpo.betta'"):
        load_config(path)


def test_removed_packing_keys_say_what_replaced_them(tmp_path):
    """Every step packs its rows: a recipe or override naming the old switch is told so in one line."""
    path = tmp_path / "old.yaml"
    path.write_text("sft:\n  packing: true\n")
    with pytest.raises(ValueError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}: config key 'sft.packing' was removed: every SFT step packs its records into rows; "
        "sft.row_tokens sets the row budget (1 = one record per row)"
    )
    with pytest.raises(ValueError, match=r"^config key 'grpo.packing' was removed: .* grpo.row_tokens sets"):
        load_config(None, ["grpo.packing=false"])


def test_overrides_win_over_yaml(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("steps: 5\noptim: {lr: 0.5}\n")
    cfg = load_config(path, ["steps=7"])
    assert cfg.steps == 7 and cfg.optim.lr == 0.5
    assert apply_overrides(TrainConfig(), ["seed=3"]).seed == 3
