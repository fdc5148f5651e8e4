"""What a run says to its user is true and short: a partial rollouts file
is scored on what it holds and says so; an episode without an answer says why it stopped; a bad
group size is one line; a mistyped key gets "did you mean"; a missing data directory is refused
unless the recipe builds it; a CPU command never loads libtpu; the banner says LoRA; TravelPlanner's
make_data counts the queries it generated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from b2tjax.config import load_config
from tests.launch_scripts import load_script
from tests.report_fixtures import b2t  # noqa: F401  (module fixture)

ROOT = Path(__file__).resolve().parents[2]


def _eval(argv: list[str], capsys) -> tuple[int, str, str]:
    script = load_script("launch/eval.py")
    code = script.run_main(script.main, [str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow  # runs launch/eval.py end to end
def test_eval_records_scores_the_instances_the_file_holds(b2t, tmp_path, capsys):  # noqa: F811
    bench, data, _, plans = b2t
    split = bench.load_split("test")
    held = split[0][0]["id"]
    path = tmp_path / "rollouts.jsonl"
    record = {"instance_id": held, "answer": json.dumps(plans[held]), "role": "agent", "episode": 0}
    path.write_text(json.dumps(record) + "\n")
    verdict = bench.evaluate(json.dumps(plans[held]), *split[0])

    code, out, _ = _eval(["--data", data, "--records", path, "--json", tmp_path / "m.json"], capsys)
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert code == 0 and metrics["n"] == 1 and metrics["delivery_rate"] == float(verdict.delivered) == 1.0
    assert f"the 1 of split 'test''s {len(split)} instances the file holds" in out.splitlines()[0]

    code, out, _ = _eval(
        ["--data", data, "--records", path, "--all-instances", "--json", tmp_path / "a.json"], capsys
    )
    metrics = json.loads((tmp_path / "a.json").read_text())
    assert (
        code == 0 and metrics["n"] == len(split) and metrics["delivery_rate"] == pytest.approx(1 / len(split))
    )
    assert f"the other {len(split) - 1} count as undelivered (--all-instances)" in out.splitlines()[0]


def test_an_episode_without_an_answer_says_why_it_stopped(b2t):  # noqa: F811
    from b2tjax.report import build_episode

    bench, _, pairs, _ = b2t
    visible, truth = pairs[0]
    episode = build_episode(
        bench, visible, None, bench.evaluate(None, visible, truth), stop_reason="max_turn_tokens"
    )
    assert not episode["delivered"] and episode["why"] == "no answer (stopped by max_turn_tokens)"
    bad = build_episode(bench, visible, "not json", bench.evaluate("not json", visible, truth))
    assert "not valid JSON" in bad["why"]  # a real answer keeps the evaluator's own reason


def test_a_group_size_of_zero_is_one_line():
    with pytest.raises(ValueError) as info:
        load_config(None, ["rollout.group_size=0"])
    lines = [line for line in str(info.value).splitlines() if "group_size" in line]
    assert lines == ["  rollout.group_size must be >= 2, got 0 (GRPO's advantages are relative to the group)"]


@pytest.mark.parametrize(
    "override, hint", [("rollout.grop_size=2", "'rollout.group_size'"), ("optim.lrr=1", "'optim.lr'")]
)
def test_an_unknown_key_gets_did_you_mean(override, hint):
    with pytest.raises(ValueError, match=f"did you mean {hint}"):
        load_config(None, [override])


def test_a_missing_data_dir_is_refused_unless_the_recipe_builds_it(tmp_path, capsys):
    typo = tmp_path / "data" / "smal"
    script = load_script("launch/train.py")
    argv = [
        "--config",
        str(ROOT / "configs" / "qwen3_0.6b.yaml"),
        f"data.data_dir={typo}",
        "--out",
        str(tmp_path / "r"),
    ]
    code = script.run_main(script.main, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"data.data_dir {typo} does not exist" in err[0]
    assert "data.build_missing=true" in err[0] and not typo.exists() and not (tmp_path / "r").exists()
    # the recipes that build their data say so
    for recipe in ("tiny_cpu.yaml", "tiny_cpu_curve.yaml", "himap_tiny_cpu.yaml"):
        assert load_config(ROOT / "configs" / recipe).data.build_missing, recipe
    assert not load_config(ROOT / "configs" / "qwen3_8b.yaml").data.build_missing


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("libtpu") is None,
    reason="libtpu is not installed: nothing to skip",
)
def test_a_cpu_command_does_not_load_libtpu():
    """With libtpu installed and no TPU attached, JAX probes libtpu (which prints its host-bounds and
    worker-hostname warnings) unless told the platform: run_main tells it."""
    if any(p.read_text().strip() == "0x1ae0" for p in Path("/sys/bus/pci/devices").glob("*/vendor")):
        pytest.skip("a TPU is attached here")
    code = (
        "import sys\n"
        "from b2tjax.cli.script import run_main\n"
        "def main(argv):\n"
        "    import jax\n"
        "    jax.devices()\n"
        "    print(any('libtpu' in line for line in open('/proc/self/maps')))\n"
        "    return 0\n"
        "sys.exit(run_main(main, []))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
    assert "host bounds" not in out.stderr and "TPU_WORKER_HOSTNAMES" not in out.stderr


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("libtpu") is None,
    reason="libtpu is not installed: no TPU plan",
)
def test_a_tpu_plan_on_a_cpu_host_prints_no_libtpu_warnings():
    """launch/plan.py loads libtpu to compile for a TPU slice (here two v5p-32 slices); told the
    slice type before it loads, libtpu does not ask this TPU-less host and prints none of its
    host-bounds or worker-hostname warnings."""
    if any(p.read_text().strip() == "0x1ae0" for p in Path("/sys/bus/pci/devices").glob("*/vendor")):
        pytest.skip("a TPU is attached here")
    code = (
        "from tests.launch_scripts import load_script\n"
        "plan = load_script('launch/plan.py')\n"
        "from b2tjax.plan.targets import parse_target, target_devices\n"
        "target = parse_target('2xv5p-32', None, 95)\n"
        "plan.use_cpu_host(target)\n"
        "print(len(target_devices(target)))\n"
    )
    unset = ("JAX_PLATFORMS", "XLA_FLAGS", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "32"  # the compile-only devices of both slices
    assert "host bounds" not in out.stderr and "TPU_WORKER_HOSTNAMES" not in out.stderr, out.stderr


@pytest.mark.slow  # loads launch/train.py (JAX, the trainer) and builds a LoRA model
def test_the_banner_says_lora_and_counts_the_adapters():
    from b2tjax.run.model_build import build_model

    script = load_script("launch/train.py")
    cfg = load_config(None, ["model.lora.rank=4"])
    model = build_model(cfg, vocab_size=64)
    c = model.config
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    h, i = c.hidden_size, c.intermediate_size
    dims = {"q_proj": h + q, "k_proj": h + kv, "v_proj": h + kv, "o_proj": q + h}
    dims.update(gate_proj=h + i, up_proj=h + i, down_proj=i + h)
    expected = c.num_hidden_layers * 4 * sum(dims[t] for t in cfg.model.lora.targets)
    banner = script.model_banner(model, cfg)
    assert banner.startswith("model: 2 layers, hidden 64, vocab 64, ")
    assert (
        ", LoRA rank 4 on q_proj, k_proj" in banner
        and f"({expected / 1e6:.2f}M trainable; base frozen)" in banner
    )
    plain = load_config(None, [])
    assert "LoRA" not in script.model_banner(build_model(plain, vocab_size=64), plain)


def test_travelplanner_make_data_counts_what_it_generated(tmp_path):
    import argparse

    from sandbox.benchmarks.travelplanner.prepare import make_data
    from tests.tp_harness import DATA_DIR  # the public data shipped with the package

    lines: list[str] = []
    args = argparse.Namespace(tp_data=DATA_DIR, generated=3, scale="small", seed=0, no_expert=True)
    make_data(tmp_path / "tp", args, lines.append)
    written = [
        json.loads(x) for x in (tmp_path / "tp" / "instances" / "train.jsonl").read_text().splitlines()
    ]
    generated = sum(v["source"] == "generated" for v in written)
    line = next(x for x in lines if x.startswith("train split: "))
    assert (
        f"train split: {len(written)} queries ({len(written) - generated} official + {generated} generated"
        in line
    )
    assert ("of 3 requested" in line) == (generated != 3)
