"""The memory plan of the split placement (`mesh.rollout_devices`), for launch/plan.py.

The target's devices are split as the trainer splits them (b2tjax/run/mesh.py: `split_meshes`; on
each host the last N devices decode, the others train) into a train and a rollout sub-mesh of one
shape. The SFT and GRPO steps compile on the train sub-mesh, beside them the rest of the train
state and the hand-over's scratch; the rollout programs on the rollout sub-mesh, beside them the
hand-over's filler (rollout/handover.py keeps both between hand-overs); the weight hand-over, in
place of the co-located refresh, on the union mesh of both, where one program gets two figures: a
train device's and a rollout device's, each with what its side holds beside it. Every figure is
checked against the device memory with the co-located plan's headroom (program_memory.failures).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import jax
from jax.sharding import Mesh

from b2tjax.config import MeshConfig, TrainConfig
from b2tjax.config.schema import Phase
from b2tjax.plan.abstract import memory_of, shard_bytes
from b2tjax.plan.memory_plan import (
    PROGRAMS,
    PlanContext,
    abstract_rollout_arrays,
    refresh_resident,
    rollout_memory,
    run_programs,
    train_step_memory,
)
from b2tjax.plan.program_memory import ProgramMemory
from b2tjax.plan.targets import Target, target_devices, target_mesh
from b2tjax.run.mesh import split_meshes
from models.qwen3 import DTYPES
from rollout.handover import Handover


def plan_meshes(target: Target, mesh: MeshConfig) -> tuple[Mesh | None, Mesh | None]:
    """(the mesh that trains, the rollout sub-mesh) on `target`'s devices: the co-located mesh and
    None, or with `mesh.rollout_devices` the trainer's split of each host's devices (an uneven
    split is its one-line UserError)."""
    if not mesh.rollout_devices:
        return target_mesh(target, mesh.data, mesh.fsdp, mesh.tensor, mesh.expert), None
    return split_meshes(mesh, target_devices(target))


def split_programs(
    cfg: TrainConfig, train: Mesh, rollout: Mesh, only: tuple[str, ...] = PROGRAMS
) -> Iterator[ProgramMemory]:
    """Memory of the split run's programs of `only`, each on the sub-mesh it runs on, each as soon
    as it is compiled."""
    train_ctx = dataclasses.replace(PlanContext.build(cfg, train), split=True)
    rollout_ctx = dataclasses.replace(PlanContext.build(cfg, rollout), split=True)
    names = run_programs(cfg, only)
    on_train = f"train sub-mesh, {train.devices.size} devices"
    for phase, name in ((Phase.SFT, "sft_step"), (Phase.GRPO, "grpo_step")):
        if name in names:
            yield _placed(train_step_memory(train_ctx, phase), "train", on_train)
    if "weight_handover" in names:
        yield from handover_memory(train_ctx, rollout_ctx)
    on_rollout = f"rollout sub-mesh, {rollout.devices.size} devices"
    if {"rollout_prefill", "rollout_decode"} & set(names):
        for program in rollout_memory(rollout_ctx, names):
            yield _placed(program, "rollout", on_rollout)


def _placed(program: ProgramMemory, side: str, placement: str) -> ProgramMemory:
    return dataclasses.replace(program, side=side, placement=placement)


def handover_memory(train: PlanContext, rollout: PlanContext) -> list[ProgramMemory]:
    """The weight hand-over (rollout/handover.py), compiled once on the union mesh: every device
    holds one train shard of each parameter (a train device its params, a rollout device the
    filler) and one sampler shard (the scratch, or the sampler weights it overwrites). Beside it
    a train device keeps the rest of the train state, a rollout device with `rollout.max_staleness`
    > 0 the KV cache and logits (the streaming session's unfinished episodes keep them across the
    update; a synchronous step's are freed when its rollout ends)."""
    src = train.sampler_weights.split(train.train_layout)[1]
    dst = rollout.sampler_weights.split(rollout.sampler_state)[1]
    handover = Handover(train.mesh, rollout.mesh, DTYPES[train.cfg.model.compute_dtype])
    lowered = handover.lower(src, dst)
    srcs = [handover.on_union(x) for x in jax.tree.leaves(src)]
    dsts = [handover.on_union(x) for x in jax.tree.leaves(dst)]
    union = f"union mesh of {handover.union.devices.size} devices"
    analytic = {k: train.analytic[k] for k in ("params", "sampler weights")}
    on_train = memory_of(
        "weight_handover",
        lowered,
        {"params": srcs, "hand-over scratch": dsts},
        refresh_resident(train),
        analytic,
    )
    on_rollout = dataclasses.replace(
        on_train,
        arguments={"hand-over filler": shard_bytes(srcs), "sampler weights": shard_bytes(dsts)},
        resident={},
        analytic={k: rollout.analytic[k] for k in ("sampler weights", "KV cache")},
        notes=["rollout.max_staleness 0: the step's KV cache is freed before the hand-over"],
    )
    if rollout.cfg.rollout.max_staleness > 0:
        cache, logits = abstract_rollout_arrays(rollout)
        on_rollout.resident = {"KV cache": shard_bytes(cache), "next-token logits": shard_bytes(logits)}
        on_rollout.notes = [
            f"rollout.max_staleness {rollout.cfg.rollout.max_staleness}: unfinished episodes keep the "
            "KV cache across the hand-over"
        ]
    return [
        _placed(on_train, "train", f"{union}: a train device"),
        _placed(on_rollout, "rollout", f"{union}: a rollout device"),
    ]


def side_peaks(programs: list[ProgramMemory]) -> dict[str, ProgramMemory]:
    """Per side ("train", "rollout"), the program whose figures use the most of a device."""
    peaks: dict[str, ProgramMemory] = {}
    for program in programs:
        if program.side and program.total_bytes >= peaks.get(program.side, program).total_bytes:
            peaks[program.side] = program
    return peaks
