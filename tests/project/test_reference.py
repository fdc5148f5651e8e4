"""docs/reference/ is generated from the code and cannot drift: regenerated here into a temporary
folder, every page must equal the committed one (`python -m b2tjax.cli.reference --out
docs/reference` rewrites them). And every key and metric is documented: each config key of the
schema has a meaning in configs/base.yaml, and the metric table matches what a run logs."""

from __future__ import annotations

import dataclasses

import pytest

from b2tjax.cli import reference
from b2tjax.config import TrainConfig
from b2tjax.run.metric_names import METRICS, undocumented

ROOT = reference.ROOT
REGENERATE = "python -m b2tjax.cli.reference --out docs/reference"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    reference.write_reference(out)
    return out


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_committed_page_equals_the_generated_one(generated, page):
    committed = ROOT / "docs" / "reference" / page
    assert committed.is_file(), f"docs/reference/{page} is missing: run {REGENERATE}"
    assert committed.read_text(encoding="utf-8") == (generated / page).read_text(encoding="utf-8"), (
        f"docs/reference/{page} drifted from the code: run {REGENERATE}"
    )


def _leaf_keys(obj, prefix=""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaf_keys(value, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


def test_every_config_key_has_a_type_default_and_meaning():
    keys = list(_leaf_keys(TrainConfig()))
    rows = {key: row for key, *row in reference.config_keys()}
    comments = reference.base_yaml_comments(reference.BASE_YAML.read_text(encoding="utf-8"))
    assert list(rows) == keys  # the page lists every key of the schema, in its order
    assert not [k for k in keys if not comments.get(k)], "keys without a comment in configs/base.yaml"
    assert rows["rollout.turn_cap"][:2] == ["str", "`stop` \\| `close`"]
    assert rows["rollout.top_p"][1] == "in (0, 1]" and rows["steps"][1] == ">= 0"
    assert rows["grpo.loss_mask"] == ["bool", "`true` \\| `false`", "`true`"]


def test_base_yaml_comments_follow_sections_and_continuations():
    text = "a: 1   # top\nb:\n  c: x   # inner\n  #   more of inner\n  d:\n    e: 2  # deep\nf: 3\n"
    assert reference.base_yaml_comments(text) == {
        "a": "top",
        "b": "",
        "b.c": "inner more of inner",
        "b.d": "",
        "b.d.e": "deep",
        "f": "",
    }


def test_every_launch_script_has_its_flags_page_section(generated):
    page = (generated / "flags.md").read_text(encoding="utf-8")
    for name in reference.SCRIPTS:
        assert f"## launch/{name}\n" in page and f"usage: {name}" in page, name


def test_metric_names_are_unique_and_match_what_runs_log():
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names)) and all(m.meaning for m in METRICS)
    # a GRPO step's keys as the trainer writes them (b2tjax/grpo, b2tjax/tasks, b2tjax/run)
    logged = {"step", "phase", "time", "loss", "reward", "adv_mean/agent", "staleness/1", "eval/c_micro"}
    assert undocumented(logged) == []
    assert undocumented({"loss", "no_such_metric", "adv_mean"}) == ["adv_mean", "no_such_metric"]


def test_a_run_that_logs_an_undocumented_metric_fails_its_test(tmp_path):
    """MetricsWriter warns on a name the table lacks; the suite's filter makes that an error, so
    every in-process run of the suite checks the names it logs."""
    from b2tjax.run.metric_names import UndocumentedMetric
    from b2tjax.run.metrics import MetricsWriter

    writer = MetricsWriter(tmp_path, total_steps=1, enabled=True, progress=False)
    with pytest.warns(UndocumentedMetric, match="no_such_metric"):
        writer.log(1, {"loss": 1.0, "no_such_metric": 2.0}, phase="grpo")
    writer.close()
    assert '"error::b2tjax.run.metric_names.UndocumentedMetric"' in (ROOT / "pyproject.toml").read_text()
