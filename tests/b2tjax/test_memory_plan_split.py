"""launch/plan.py with `mesh.rollout_devices`: the split placement's plan on fake CPU devices.

The tiny recipe (2 layers, hidden 64, a 4,096-token vocabulary) in bf16 on 8 devices split 4 + 4,
each sub-mesh fsdp 2 x tensor 2, against the co-located plan of the same recipe on 4 devices of
that shape: the same programs on the same mesh shape, so every difference is what each side holds.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from b2tjax.errors import UserError
from b2tjax.run.mesh import split_devices
from tests.b2tjax.test_memory_plan import ROOT, run_plan

TINY = ROOT / "configs" / "tiny_cpu.yaml"
MESH = ("mesh.data=1", "mesh.fsdp=2", "mesh.tensor=2")
# a KL reference (on the train side); streaming, whose session keeps the KV cache across the hand-over
RECIPE = (*MESH, "model.compute_dtype=bfloat16", "grpo.beta=0.04", "rollout.max_staleness=1")
# Hand-computed parameters of the tiny preset: per layer q, k, v, o (4 heads, 2 KV heads, head_dim 16
# on hidden 64), q/k norms, the MLP (64 x 128, three matrices) and two norms; the tied 4,096 x 64
# embedding and the final norm.
LAYER = 64 * 16 * (4 + 2 + 2 + 4) + 2 * 16 + 3 * 64 * 128 + 2 * 64
PARAMS = 4096 * 64 + 2 * LAYER + 64


def _split(tmp_path, *args):
    return run_plan(tmp_path, TINY, "--target", "cpu", "--devices", "8", *RECIPE, *args)


def _near(value: int, expected: float, tolerance: float = 0.02) -> bool:
    """Within `tolerance`: the few norm vectors are replicated, not sharded."""
    return abs(value - expected) <= tolerance * expected


@pytest.mark.slow  # two plans (6 and 2 programs) in subprocesses (~1 minute on 2 shared cores)
def test_each_side_holds_only_its_own_arrays(tmp_path):
    (tmp_path / "split").mkdir(), (tmp_path / "colo").mkdir()
    proc, split = _split(tmp_path / "split", "mesh.rollout_devices=4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the co-located programs the sides are compared with: its step and its decode
    colo_args = ("--target", "cpu", "--devices", "4", "--programs", "grpo_step,rollout_decode")
    colo_proc, colo = run_plan(tmp_path / "colo", TINY, *colo_args, *RECIPE)
    assert colo_proc.returncode == 0, colo_proc.stderr[-3000:]
    sides = {(p["name"], p["side"]): p for p in split["programs"]}
    assert list(sides) == [
        ("sft_step", "train"),
        ("grpo_step", "train"),
        ("weight_handover", "train"),
        ("weight_handover", "rollout"),
        ("rollout_prefill", "rollout"),
        ("rollout_decode", "rollout"),
    ]
    assert split["placement"]["train_device_ids"] == [0, 1, 2, 3]
    assert split["placement"]["rollout_device_ids"] == [4, 5, 6, 7]
    assert "rollout_decode (per device, rollout sub-mesh, 4 devices)" in proc.stdout
    colo_by_name = {p["name"]: p for p in colo["programs"]}

    # Train side: fp32 params over fsdp x tensor = 4, AdamW's two moments alike, the KL reference a
    # copy of the params; sampler weights and KV cache are not there.
    grpo = sides[("grpo_step", "train")]
    assert _near(grpo["arguments"]["params"], PARAMS * 4 / 4)
    assert _near(grpo["arguments"]["optimizer state"], 2 * PARAMS * 4 / 4)
    assert _near(grpo["resident"]["KL reference params"], PARAMS * 4 / 4)
    # ... but the hand-over's scratch (rollout/handover.py keeps one sampler shard per train device
    # between hand-overs): the co-located sampler copy's bytes, so the step's total is the co-located
    # one's. The co-located step never had the KV cache beside it (that lives in the rollout's turn).
    sampler = colo_by_name["grpo_step"]["resident"]["sampler weights"]
    assert grpo["resident"]["hand-over scratch"] == sampler
    assert _near(sampler, PARAMS * 2 / 2)  # bf16 over tensor 2
    assert grpo["total_bytes"] == colo_by_name["grpo_step"]["total_bytes"]

    # Rollout side: bf16 sampler weights over tensor 2, the KV page pool of 4 rows x 3,584 slots x
    # (2 layers x K,V x 2 KV heads x 16 dims x 2 bytes) over 2 row shards x 2 head shards, with the
    # rows' page tables (224 pages of 16 each, int32) and fill lengths over the row shards; beside
    # them only the filler (one fp32 train shard of each parameter), no optimizer state, no reference.
    decode, colo_decode = sides[("rollout_decode", "rollout")], colo_by_name["rollout_decode"]
    kv = 4 * 3584 * (2 * 2 * 2 * 16 * 2) / (2 * 2) + 4 * (224 + 1) * 4 / 2
    assert _near(decode["arguments"]["sampler weights"], PARAMS * 2 / 2)
    assert _near(decode["arguments"]["KV cache"], kv, 0.001)
    assert list(decode["resident"]) == ["hand-over filler"]
    assert decode["resident"]["hand-over filler"] == grpo["arguments"]["params"]
    saved = sum(colo_decode["resident"].values()) - decode["resident"]["hand-over filler"]
    assert _near(saved, (2 * PARAMS * 4 + PARAMS * 4) / 4)  # the moments and the reference
    assert decode["total_bytes"] == colo_decode["total_bytes"] - saved

    # The hand-over: one program, each side with its own arrays beside it.
    train_side, rollout_side = sides[("weight_handover", "train")], sides[("weight_handover", "rollout")]
    assert train_side["peak_bytes"] == rollout_side["peak_bytes"]
    assert set(train_side["resident"]) == {"optimizer state", "KL reference params"}
    assert set(rollout_side["resident"]) == {"KV cache", "next-token logits"}
    assert rollout_side["resident"]["KV cache"] == decode["arguments"]["KV cache"]
    assert "sampler_refresh" not in proc.stdout
    assert "train side: at most" in proc.stdout and "rollout side: at most" in proc.stdout


def test_an_uneven_split_is_refused_in_one_line(tmp_path):
    from tests.launch.test_cli_errors import run_script  # forked from one server: no JAX start

    args = ("--target", "cpu", "--devices", "8", *RECIPE, "mesh.rollout_devices=3")
    proc = run_script("plan.py", "--config", TINY, "--json", tmp_path / "plan.json", *args)
    assert proc.returncode == 2 and not (tmp_path / "plan.json").exists()
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: mesh.rollout_devices=3 must be half of each process's devices (process 0 has 8): "
        "the train and rollout sub-meshes need one shape"
    )
    assert "Traceback" not in proc.stderr


def test_split_devices_takes_the_last_of_each_hosts_devices():
    """A compile-only target's devices (process_index = host), as launch/plan.py passes them."""
    hosts = [SimpleNamespace(id=i, process_index=i // 4) for i in range(8)]
    train, rollout = split_devices(2, hosts)
    assert [d.id for d in train] == [0, 1, 4, 5] and [d.id for d in rollout] == [2, 3, 6, 7]
    with pytest.raises(UserError, match="process 0 has 4"):
        split_devices(1, hosts)
