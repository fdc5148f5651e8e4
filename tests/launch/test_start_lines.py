"""What used to be a traceback minutes into a run is a line at its start, or a clean stop: the
single-node GPU recipes start without a distributed coordinator, a recipe on other hardware than
its `hardware:` says so with the launch/plan.py hint, and a first Ctrl-C saves and stops like a
SIGTERM (a second one stops at once)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from b2tjax.cli.hardware import check_hardware
from b2tjax.config import load_config
from b2tjax.errors import UserError
from b2tjax.run.checkpoint import PreemptionGuard

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("recipe", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_a_recipe_for_one_gpu_node_needs_no_coordinator(recipe):
    hw = load_config(CONFIGS / recipe).hardware
    one_gpu_node = hw.target[:1].isalpha() and not hw.device_kind.lower().startswith(("tpu", "cpu"))
    if one_gpu_node:  # "h100-8", not "2xh100-8": one process sees every GPU of the node
        assert load_config(CONFIGS / recipe).distributed is False, recipe


def test_a_recipe_on_other_hardware_is_refused_in_one_line_with_the_plan_hint():
    hw = load_config(CONFIGS / "qwen3_0.6b.yaml").hardware
    found = r"sized for h100-1 \(1 x H100 80GB\) but this run found 1 x cpu"
    with pytest.raises(UserError, match=found) as err:
        check_hardware(hw, "cpu", 1, "configs/qwen3_0.6b.yaml")
    assert "launch/plan.py --config configs/qwen3_0.6b.yaml" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="found 4 x tpu"):  # a slice smaller than the recipe's
        check_hardware(load_config(CONFIGS / "qwen3_8b_tpu.yaml").hardware, "tpu", 4, "r.yaml")
    check_hardware(hw, "gpu", 8, "configs/qwen3_0.6b.yaml")  # more than needed: fine
    check_hardware(load_config(CONFIGS / "tiny_cpu.yaml").hardware, "cpu", 1, "configs/tiny_cpu.yaml")
    anyway = load_config(CONFIGS / "qwen3_0.6b.yaml", ["hardware.device_kind=cpu"]).hardware
    check_hardware(anyway, "cpu", 1, "configs/qwen3_0.6b.yaml")  # the escape the line names


def test_a_first_ctrl_c_asks_for_a_save_and_stop_a_second_stops_now(capsys):
    before = signal.getsignal(signal.SIGINT)  # a job started in the background ignores SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _first_ctrl_c_then_second(capsys)
    finally:
        signal.signal(signal.SIGINT, before)


def _first_ctrl_c_then_second(capsys):
    with PreemptionGuard() as guard:
        os.kill(os.getpid(), signal.SIGINT)  # handled before kill returns (the main thread)
        assert guard.requested and "Ctrl-C" in capsys.readouterr().out
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored after the run
