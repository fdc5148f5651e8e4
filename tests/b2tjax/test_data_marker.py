"""A data directory names its benchmark (benchmark.json), and eval / rollouts / train read it:
`eval.py --data data/tp` scores TravelPlanner without `--benchmark`, a contradicting
`--benchmark` is one line naming both, and a directory without the marker keeps the old default."""

from __future__ import annotations

import json

import pytest

from b2tjax.cli.prepare import ensure_data
from b2tjax.cli.script import benchmark_parser
from b2tjax.config import load_config
from b2tjax.data.marker import MARKER, MarkerError, check_marker, read_marker
from b2tjax.errors import UserError
from tests.launch_scripts import load_script
from tests.tp_fixtures import tp_data  # noqa: F401 - fixture


def test_make_data_writes_the_marker_and_eval_reads_it(tp_data, tmp_path, capsys):
    assert json.loads((tp_data / MARKER).read_text())["benchmark"] == "travelplanner"
    assert read_marker(tp_data) == "travelplanner"
    out = tmp_path / "metrics.json"
    # no --benchmark: the directory says which one, and its expert passes every training query
    assert (
        load_script("launch/eval.py").main(
            ["--data", str(tp_data), "--policy", "expert", "--split", "train", "--json", str(out)]
        )
        == 0
    )
    metrics = json.loads(out.read_text())
    assert metrics["n"] == 45 and metrics["final_pass_rate"] == 1.0
    assert "final_pass_rate" in capsys.readouterr().out


def test_train_takes_the_benchmark_from_its_data_dir(tp_data, monkeypatch):
    train = load_script("launch/train.py")
    reads = []
    monkeypatch.setattr(train, "load_config", lambda *a: reads.append(a) or load_config(*a))
    args = train.parse_args([f"data.data_dir={tp_data}", "--out", "runs/tp"])
    cfg, _ = train.resolve_config(args, train.read_recipe(args))
    assert cfg.benchmark == "travelplanner" and cfg.data.data_dir == str(tp_data)
    assert len(reads) == 1  # the recipe is read once, the data's benchmark applied to it
    args = train.parse_args(["--benchmark", "b2t", f"data.data_dir={tp_data}"])
    chosen, _ = train.resolve_config(args, train.read_recipe(args))
    assert chosen.benchmark == "b2t"  # an explicit choice stands; the data step then refuses it (below)


def test_a_contradicting_benchmark_is_one_line_naming_both(tp_data):
    with pytest.raises(UserError, match=r"holds travelplanner data, not b2t: pass --benchmark travelplanner"):
        benchmark_parser(["--data", str(tp_data), "--benchmark", "b2t"], "of the plans")
    with pytest.raises(UserError, match="holds travelplanner data, not b2t"):
        ensure_data(tp_data, "small", "b2t")  # train.py's data step
    ensure_data(tp_data, "small", "travelplanner")  # the right benchmark: present, nothing to build


def test_without_a_marker_the_default_or_the_given_benchmark_applies(tmp_path):
    assert read_marker(tmp_path) is None and read_marker(None) is None
    assert benchmark_parser(["--data", str(tmp_path)], "x")[1] == "b2t"
    assert (
        benchmark_parser(["--data", str(tmp_path), "--benchmark", "travelplanner"], "x")[1] == "travelplanner"
    )
    check_marker(tmp_path, "travelplanner")  # nothing to contradict
    (tmp_path / MARKER).write_text("[1, 2]\n")
    with pytest.raises(MarkerError, match=f"{MARKER} is not a benchmark marker"):
        read_marker(tmp_path)
