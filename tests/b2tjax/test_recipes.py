"""The recipes as overrides of one commented base: every recipe means what it meant.

tests/data/recipes_merged.json holds every recipe's merged config as main's loader resolved it
before the recipes were rewritten over `base:` chains, recipes_rollout_merged.json their rollout
sections as launch/rollouts.py read them (both written by that code, not by this one): each
recipe must still resolve to them, key by key. configs/base.yaml must be the schema's defaults,
list every knob, and comment each with the allowed values its annotation declares.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from b2tjax.config import TrainConfig, load_config, load_rollout_config
from b2tjax.config.loader import REMOVED_KEYS
from b2tjax.run.policy import ROLLOUT_DEFAULTS
from models.fields import allowed_values, field_range, field_type

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
GOLDEN = json.loads((ROOT / "tests" / "data" / "recipes_merged.json").read_text())
ROLLOUT_GOLDEN = json.loads((ROOT / "tests" / "data" / "recipes_rollout_merged.json").read_text())
# What later issues changed in the recipes on purpose, one file per issue: {recipe: {dotted key:
# value}}. The goldens stay what the old loader wrote; these are the deliberate differences.
CHANGES: dict[str, dict[str, Any]] = {}
for _changes in sorted((ROOT / "tests" / "data" / "recipe_changes").glob("*.json")):
    for _recipe, _keys in json.loads(_changes.read_text()).items():
        CHANGES.setdefault(_recipe, {}).update(_keys)


# Keys the config no longer has (each refused with what replaced it): the goldens' values of them go.
REMOVED = set(REMOVED_KEYS)


def wanted(name: str) -> dict[str, Any]:
    """The recipe's merged config of before, with the issues' deliberate changes applied."""
    return {k: v for k, v in {**GOLDEN[name], **CHANGES.get(name, {})}.items() if k not in REMOVED}


def flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{'rollout': {'top_k': 0}} -> {'rollout.top_k': 0}; `model.overrides` stays one value."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and prefix + key != "model.overrides":
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def merged(path: Path) -> dict[str, Any]:
    return json.loads(json.dumps(flat(load_config(path).to_dict())))  # tuples -> lists, as the golden


def test_the_golden_lists_every_recipe():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted([*GOLDEN, "base.yaml"])


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_recipe_resolves_to_its_merged_config_of_before(name):
    got, want = merged(CONFIGS / name), wanted(name)
    defaults = json.loads(json.dumps(flat(TrainConfig().to_dict())))
    changed = {k: (want[k], got.get(k, "<absent>")) for k in want if got.get(k, "<absent>") != want[k]}
    assert changed == {}, f"{name}: key: (before, now)"
    # a knob added to the schema since then: every recipe must leave it at its default, except
    # data.build_missing, which says which recipes built their data before
    meant = {
        "data.build_missing": name in ("tiny_cpu.yaml", "tiny_cpu_curve.yaml", "himap_tiny_cpu.yaml"),
        **CHANGES.get(name, {}),
    }
    added = {k: v for k, v in got.items() if k not in want and v != meant.get(k, defaults[k])}
    assert added == {}, name


def test_base_yaml_is_the_schema_defaults_and_lists_every_knob():
    assert load_config(CONFIGS / "base.yaml").to_dict() == TrainConfig().to_dict()
    written = flat(yaml.safe_load((CONFIGS / "base.yaml").read_text()))
    assert sorted(written) == sorted(flat(TrainConfig().to_dict()))


def _knob_lines(text: str) -> dict[str, str]:
    """Dotted key -> the comment on its line, for every leaf of a block-style YAML file."""
    lines, stack = {}, []
    for line in text.splitlines():
        match = re.match(r"^( *)([a-z_0-9]+):(.*)$", line)
        if not match:
            continue
        indent, key, rest = len(match[1]) // 2, match[2], match[3]
        stack[indent:] = [key]
        value, _, comment = rest.partition("  #")
        if value.strip():  # a leaf (a section line has no value)
            lines[".".join(stack)] = comment.strip()
    return lines


def _declared(cfg: Any, prefix: str = "") -> dict[str, tuple[str, ...]]:
    """Dotted key -> what its annotation allows, in words: its range, or each of its choices."""
    out = {}
    for f in dataclasses.fields(cfg):
        value, key = getattr(cfg, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            out.update(_declared(value, key + "."))
            continue
        allowed = field_range(type(cfg), f.name)
        choices = allowed_values(field_type(type(cfg), f.name))
        out[key] = (str(allowed),) if allowed else tuple(map(str, choices or ()))
    return out


def test_base_yaml_comments_every_knob_with_its_declared_values():
    comments = _knob_lines((CONFIGS / "base.yaml").read_text())
    declared = _declared(TrainConfig())
    assert sorted(comments) == sorted(declared)
    missing = {key: [word for word in words if word not in comments[key]] for key, words in declared.items()}
    assert {key: words for key, words in missing.items() if words} == {}
    assert [key for key, comment in comments.items() if not comment] == []


def _own_keys(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    data.pop("base", None)
    return flat(data)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_a_recipe_holds_only_what_differs_from_its_base(name):
    path = CONFIGS / name
    assert len(path.read_text().splitlines()) <= 30, "a recipe is a short override"
    base = yaml.safe_load(path.read_text()).get("base")
    inherited = flat((load_config(CONFIGS / base) if base else TrainConfig()).to_dict())
    # the machine is stated whole in each recipe (hardware:, mesh:), even where it equals the base
    restated = {
        k: v
        for k, v in _own_keys(path).items()
        if v == inherited[k] and not k.startswith(("hardware.", "mesh."))
    }
    assert restated == {}, f"{name} restates its base ({base or 'the defaults'})"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_launch_rollouts_reads_every_recipe_as_before(name):
    """`launch/rollouts.py --config RECIPE` starts from its own rollout defaults, not the schema's:
    the recipes' chains set the same rollout knobs over them as the flat recipes did."""
    changes = CHANGES.get(name, {}).items()
    changed = {k.removeprefix("rollout."): v for k, v in changes if k.startswith("rollout.")}
    want = {k: changed.get(k, v) for k, v in ROLLOUT_GOLDEN[name].items() if f"rollout.{k}" not in REMOVED}
    got = dataclasses.asdict(load_rollout_config(CONFIGS / name, base=ROLLOUT_DEFAULTS))
    assert {k: (want[k], got[k]) for k in want if got[k] != want[k]} == {}


# -- the `base:` chain ---------------------------------------------------------------------------
def test_a_chain_merges_root_first_sections_by_key_lists_whole(tmp_path):
    (tmp_path / "root.yaml").write_text(
        f"base: {CONFIGS / 'base.yaml'}\nsteps: 3\nrollout: {{max_turns: 5, top_k: 7}}\n"
        "data: {difficulties: [easy, hard]}\n"
    )
    (tmp_path / "mid.yaml").write_text("base: root.yaml\nrollout: {top_k: 9}\n")
    (tmp_path / "leaf.yaml").write_text("base: mid.yaml\ndata: {difficulties: [medium]}\n")
    cfg = load_config(tmp_path / "leaf.yaml", ["steps=4"])
    assert (cfg.steps, cfg.rollout.max_turns, cfg.rollout.top_k) == (4, 5, 9)
    assert cfg.data.difficulties == ["medium"]
    assert cfg.rollout.group_size == TrainConfig().rollout.group_size


def test_a_loop_or_a_missing_base_is_one_line_naming_the_files(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ValueError) as loop:
        load_config(tmp_path / "a.yaml")
    assert str(loop.value) == f"{tmp_path / 'b.yaml'}: base 'a.yaml' makes a loop (a.yaml -> b.yaml)"
    (tmp_path / "c.yaml").write_text("base: nothere.yaml\n")
    with pytest.raises(ValueError, match=r"config file .*nothere.yaml does not exist"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("base: [a.yaml]\n")
    with pytest.raises(ValueError, match=r"d.yaml: base must be the file name of a recipe"):
        load_config(tmp_path / "d.yaml")
    for i in range(12):
        (tmp_path / f"chain{i}.yaml").write_text(f"base: chain{i + 1}.yaml\n")
    with pytest.raises(ValueError, match=r"chain7.yaml: base 'chain8.yaml' makes a chain of over 8 recipes"):
        load_config(tmp_path / "chain0.yaml")
    with pytest.raises(ValueError, match="unknown config key 'base'"):
        load_config(None, ["base=a.yaml"])  # a file's key, not a knob


def test_an_error_in_a_base_names_the_base(tmp_path):
    (tmp_path / "parent.yaml").write_text("rollout: {top_k: -1}\ngrpo: {betta: 1}\n")
    (tmp_path / "child.yaml").write_text("base: parent.yaml\n")
    with pytest.raises(ValueError) as info:
        load_config(tmp_path / "child.yaml")
    assert str(info.value).startswith(f"{tmp_path / 'parent.yaml'}: unknown config key 'grpo.betta'")
