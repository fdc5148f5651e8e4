"""benchmarks/results_table.py: the table's cells are mean ± sample std of per-seed eval.json values, a
missing run is a one-line error naming the command that makes it, and every row's command is a
valid config of the curve recipe."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from b2tjax.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "results_table.py"
RECIPE = ROOT / "configs" / "tiny_cpu_curve.yaml"


@pytest.fixture(scope="module")
def results_table():
    spec = importlib.util.spec_from_file_location("results_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_cells_are_mean_and_sample_std_over_seeds(results_table):
    seeds = [
        {"delivery_rate": 0.1, "final_pass_rate": 0.0, "mean_reward": -0.5, "action_error_rate": 0.5},
        {"delivery_rate": 0.3, "final_pass_rate": 0.0, "mean_reward": -0.25, "action_error_rate": 0.25},
        {"delivery_rate": 0.2, "final_pass_rate": 0.0, "mean_reward": 0.0, "action_error_rate": 0.0},
    ]
    table = results_table.format_table([("SFT + GRPO", seeds), ("Expert", [{"delivery_rate": 1.0}])])
    header, rule, grpo, expert = table.splitlines()
    assert header.split("|")[2].strip() == "Delivery %" and rule.startswith("|---|")
    cells = [c.strip() for c in grpo.split("|")[1:-1]]
    assert cells[0] == "SFT + GRPO (n=3)"
    # delivery: mean 0.2, sample std sqrt(((-0.1)^2 + 0.1^2 + 0) / 2) = 0.1 -> percent
    assert cells[1] == "20.0 ± 10.0"
    assert cells[6] == "0.0 ± 0.0"  # final pass
    assert cells[7] == "-0.250 ± 0.250"  # reward: mean -0.25, std 0.25 (a plain number)
    assert cells[8] == "25.0 ± 25.0"  # action error rate in percent
    assert cells[2] == "n/a"  # a column the runs did not record
    expert_cells = [c.strip() for c in expert.split("|")[1:-1]]
    assert expert_cells[:2] == ["Expert (n=1)", "100.0"]  # one value: no ± part


def test_from_runs_names_the_missing_run_and_its_command(results_table, tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in (0, 1):  # everything but the ReAct run of seed 1
        for row in results_table.ROWS:
            if (row.prefix, seed) != ("react", 1):
                (runs / f"{row.prefix}-s{seed}").mkdir(parents=True)
                (runs / f"{row.prefix}-s{seed}" / "eval.json").write_text(json.dumps({"mean_reward": 0.0}))
    code = results_table.run_main(
        results_table.main, ["--from-runs", "--runs", str(runs), "--seeds", "0", "1"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "1 run(s) have no eval.json" in err and str(runs / "react-s1") in err
    assert "rollout.prompt_style=react" in err and "seed=1" in err
    assert f"model.init=ckpt:{runs}/sft-s1/checkpoints" in err


def test_every_row_is_a_valid_config_of_the_curve_recipe(results_table, tmp_path):
    for row in results_table.ROWS:
        command = results_table.train_command(row, 2, tmp_path, RECIPE)
        assert command[:3] == ["launch/train.py", "--config", "configs/tiny_cpu_curve.yaml"]
        overrides = command[command.index("seed=2") :]
        cfg = load_config(RECIPE, overrides + [f"out={command[command.index('--out') + 1]}"])
        assert cfg.seed == 2 and cfg.data.eval_split == "" and cfg.out == str(tmp_path / f"{row.prefix}-s2")
    modes = {row.prefix: load_config(RECIPE, list(row.overrides[:1])).mode for row in results_table.ROWS}
    assert modes == {"untrained": "eval", "sft": "sft_only", "react": "eval", "curve": "grpo"}


def test_curve_ends_average_the_first_and_last_grpo_steps(results_table):
    rows = [{"step": 1, "phase": "sft", "loss": 3.0, "reward": 9.0}]  # SFT steps are not part of it
    rewards = [-1.0, -0.5, -0.5, 0.0, 0.0, 0.0]
    errors = [1.0, 0.5, 0.5, 0.0, 0.0, 0.0]
    rows += [
        {"step": 2 + i, "phase": "grpo", "reward": r, "action_error_rate": e}
        for i, (r, e) in enumerate(zip(rewards, errors))
    ]
    ends = results_table.curve_ends(rows, window=4)
    assert ends["reward"] == pytest.approx((-0.5, -0.125))  # (-1 - .5 - .5 + 0) / 4, (-.5 - .5 + 0 + 0) / 4
    assert ends["action_error_rate"] == pytest.approx((0.5, 0.125))
    assert "truncated_rate" not in ends  # not logged: left out, shown as n/a
    halves = results_table.curve_ends(rows)  # default: the first and second half of the GRPO steps
    assert halves["reward"] == pytest.approx((-2 / 3, 0.0))
    table = results_table.format_curves({0: ends})
    assert "| 0 | -0.500 → -0.125 | 0.500 → 0.125 | n/a |" in table


def test_pooled_error_change_counts_episodes_and_tests_the_two_halves(results_table):
    """Two seeds of 4 GRPO steps x 8 episodes: errors 6+5 then 3+2 (seed 0), 7+6 then 4+4 (seed 1)."""

    def run(rates):
        return [{"phase": "sft", "loss": 1.0}] + [
            {"phase": "grpo", "episodes": 8.0, "action_error_rate": k / 8} for k in rates
        ]

    assert results_table.error_counts(run([6, 5, 3, 2])) == ((11, 16), (5, 16))
    line = results_table.format_error_change({0: run([6, 5, 3, 2]), 1: run([7, 6, 4, 4])})
    assert "24/32 in the first half of GRPO, 13/32 in the second" in line
    # By hand: rates .75 and .40625, pooled .578125; se = sqrt(.578125 * .421875 * (2 / 32)) = .12347
    z, p = results_table.two_proportion_test((24, 32), (13, 32))
    assert z == pytest.approx(2.7843, abs=1e-3) and p == pytest.approx(0.00536, abs=1e-4)
    assert "z = 2.78" in line
    assert results_table.two_proportion_test((0, 8), (0, 8)) == (0.0, 1.0)
