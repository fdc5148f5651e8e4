"""A recipe's device memory, computed by compiling its programs ahead of time (launch/plan.py).

The SFT step, the GRPO step and the sampler's prefill and decode are the very jitted functions a
run executes (b2tjax.run.trainer.phase_step_fns, rollout.programs' compiled prefill / decode). They
are lowered with abstract arguments (jax.ShapeDtypeStruct carrying the run's shardings) and
compiled for the mesh; nothing is allocated. `compiled.memory_analysis()` gives per-device bytes
of arguments, outputs, donated (aliased) buffers and temporaries. Arrays that stay alive while a
program runs without being its arguments (the train state during a rollout, the sampler weights
and the KL reference during a train step) are added as "resident".

The compile is for the mesh's devices: compile-only devices of a TPU slice or of NVIDIA GPUs
(b2tjax/plan/targets.py), whose own compiler assigns the buffers, or N fake CPU devices, whose XLA:CPU
buffer assignment overstates bf16 programs (fp32 copies of bf16 weights, copies of the carried KV
cache; docs/results/memory-plans.md compares the two). A TPU compile that runs out of device memory is
reported as a program that does not fit, with the compiler's own message.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from b2tjax.config import TrainConfig
from b2tjax.config.schema import Phase
from b2tjax.plan.abstract import abstract_outputs, memory_of, shard_bytes, shards, with_shardings
from b2tjax.plan.attention import attention_note
from b2tjax.plan.program_memory import GIB, ProgramMemory
from b2tjax.plan.train_shapes import packed_bound, train_batch_shape
from b2tjax.run.adapters import abstract_run_model, base_init
from b2tjax.run.model_build import recipe_rope
from b2tjax.run.phases import phase_optimizer, phase_step_fns
from b2tjax.step.batch import TrainBatch
from b2tjax.step.train_step import BoundModel, abstract_train_state, state_shardings
from models.config import Qwen3Config, get_config
from models.qwen3 import DTYPES
from models.sharding import MESH_AXES, ROW_AXES, on_mesh, variable_sharding
from models.sharding import state_shardings as param_shardings
from rollout.placement import SamplerWeights, new_rollout_arrays
from rollout.programs import compiled_functions, decode_bucket, program_platform
from rollout.sampling import SamplingArrays

# ----------------------------------------------------------------------------------------------
# Model and abstract arrays


def plan_model_config(cfg: TrainConfig) -> Qwen3Config:
    """The model the run builds: the checkpoint's config.json for hf:/ckpt: inits when present,
    else the preset; the tiny recipe's vocabulary is its SentencePiece size, as in the trainer;
    the recipe's RoPE scaling on either (b2tjax/run/model_build.recipe_rope)."""
    overrides = dict(cfg.model.overrides)
    init = cfg.model.init
    if init.startswith("hf:"):
        init = base_init(cfg.model)  # a PEFT adapter directory: its base's config
    if init.startswith(("hf:", "ckpt:")):
        path = Path(init.split(":", 1)[1]) / "config.json"
        if path.exists():
            base = Qwen3Config.from_hf(json.loads(path.read_text()))
            return recipe_rope(cfg, dataclasses.replace(base, **overrides) if overrides else base)
    if cfg.task == "travel" and cfg.model.tokenizer == "sentencepiece":
        overrides.setdefault("vocab_size", cfg.model.sp_vocab_size)
    return recipe_rope(cfg, get_config(cfg.model.preset, **overrides))


def analytic_sizes(
    cfg: TrainConfig, model: Qwen3Config, mesh: Mesh | None, trained: int | None = None, frozen_bytes: int = 0
) -> dict[str, int]:
    """Closed-form per-device bytes: fp32 params and Adam moments over all devices (FSDP x expert x
    tensor; a Qwen3-MoE's other weights are not split by the expert axis), the sampler's
    compute-dtype weights over `tensor` (its experts over expert x tensor), the KV cache over rows
    and KV heads. Under LoRA `trained` counts the adapters' parameters and `frozen_bytes` is the
    frozen base, which the sampler shares (one device) instead of holding its own copy."""
    trained = model.num_params() if trained is None else trained
    experts = 0 if frozen_bytes else model.num_expert_params()  # LoRA: the adapters, laid out as dense
    param_bytes = _split_bytes(trained, experts, DTYPES[cfg.model.param_dtype], mesh, MESH_AXES)
    cache_bytes = jnp.dtype(DTYPES[cfg.cache_dtype]).itemsize
    row_shards = math.gcd(cfg.rollout.batch_rows, shards(mesh, *ROW_AXES))
    head_shards = math.gcd(model.num_key_value_heads, shards(mesh, "tensor"))
    slots = cfg.rollout.pool_pages * cfg.rollout.page_size  # the page pool's
    kv = 2 * model.num_hidden_layers * slots * model.num_key_value_heads * model.head_dim * cache_bytes
    sampler_params = trained if frozen_bytes else model.num_params()
    sampler = _split_bytes(sampler_params, experts, DTYPES[cfg.model.compute_dtype], mesh, ("tensor",))
    sizes = {
        "params": param_bytes,
        "optimizer state": 2 * param_bytes,
        "sampler weights": sampler,
        "KV cache": kv // (row_shards * head_shards),
    }
    return sizes | ({"frozen base": frozen_bytes // shards(mesh, *MESH_AXES)} if frozen_bytes else {})


def _split_bytes(params: int, experts: int, dtype: Any, mesh: Mesh | None, axes: tuple[str, ...]) -> int:
    """Per-device bytes of `params` in `dtype`, split over `axes` of `mesh`; the `experts` among
    them also over the expert axis, the others replicated on it."""
    itemsize = jnp.dtype(dtype).itemsize
    over = shards(mesh, *(a for a in axes if a != "expert"))
    return experts * itemsize // (over * shards(mesh, "expert")) + (params - experts) * itemsize // over


# ----------------------------------------------------------------------------------------------
# The programs


@dataclasses.dataclass
class PlanContext:
    """What every program's plan needs: config, mesh, the abstract model and train state."""

    cfg: TrainConfig
    mesh: Mesh | None
    model: Qwen3Config
    model_fn: Any  # b2tjax.step.train_step.BoundModel
    graphdef: Any  # the whole model's graph, as the sampler splits it
    params: Any  # abstract fp32 params (pure dict) with the trainer's shardings (LoRA: the adapters)
    frozen: Any  # LoRA's abstract frozen base (pure dict) with the trainer's shardings, else {}
    train_layout: Any  # the whole model state (nnx.State) as the trainer holds it
    sampler_state: Any  # abstract sampler weights (nnx.State) with the sampler's shardings
    sampler_weights: Any  # rollout.placement.SamplerWeights: create / refresh
    analytic: dict[str, int]
    # one side of the split placement (b2tjax/plan/split_plan.py): the other side's arrays are not
    # resident here, the hand-over's filler or scratch is (rollout/handover.py)
    split: bool = False

    @classmethod
    def build(cls, cfg: TrainConfig, mesh: Mesh | None) -> PlanContext:
        model_cfg = plan_model_config(cfg)
        model = abstract_run_model(cfg, model_cfg, mesh)
        model_fn, params = BoundModel.from_model(model)
        params = with_shardings(
            params, None if mesh is None else param_shardings(model_fn.abstract_params, mesh)
        )
        frozen = with_shardings(
            BoundModel.frozen_of(model),
            None if mesh is None else param_shardings(model_fn.abstract_frozen, mesh),
        )
        graphdef, full_state = nnx.split(model)
        train_layout = with_shardings(
            full_state, None if mesh is None else _state_shardings(full_state, mesh)
        )
        weights = SamplerWeights(full_state, DTYPES[cfg.model.compute_dtype], mesh)
        sampler_state = abstract_outputs(weights.create, train_layout, mesh=mesh)
        return cls(
            cfg,
            mesh,
            model_cfg,
            model_fn,
            graphdef,
            params,
            frozen,
            train_layout,
            sampler_state,
            weights,
            analytic_sizes(
                cfg, model_cfg, mesh, sum(x.size for x in jax.tree.leaves(params)), _bytes(frozen)
            ),
        )

    def reference_bytes(self) -> int:
        """The frozen KL reference: a second copy of the fp32 params when grpo.beta > 0."""
        return shard_bytes(self.params) if self.cfg.grpo.beta > 0 else 0


def _bytes(tree: Any) -> int:
    """Total bytes of the arrays in `tree` (all devices together)."""
    return sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def _state_shardings(state: nnx.State, mesh: Mesh) -> nnx.State:

    return jax.tree.map(
        lambda v: variable_sharding(v, mesh), state, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )


def train_step_memory(ctx: PlanContext, phase: Phase) -> ProgramMemory:
    """The SFT or GRPO optimizer step at the recipe's largest batch (`train_batch_shape`)."""

    cfg = ctx.cfg
    optimizer, schedule = phase_optimizer(cfg, phase, 1)
    state = abstract_train_state(ctx.params, optimizer, ctx.mesh)
    fns = phase_step_fns(
        cfg,
        ctx.model_fn,
        optimizer,
        schedule,
        state_shardings(state) if ctx.mesh is not None else None,
        ctx.mesh,
        frozen=ctx.frozen,
    )
    shape = train_batch_shape(cfg, phase)
    micro_rows = shape[1]
    tokens = jax.ShapeDtypeStruct(shape, jnp.float32)
    # the widest loss_positions (K = T): a step's K is at most T, so the plan bounds every K;
    # segment-aware attention over the packed rows (the step's own program)
    token_ids = jax.ShapeDtypeStruct(shape, jnp.int32)
    batch = TrainBatch(
        ids=token_ids, mask=tokens, positions=token_ids, segment_ids=token_ids, token_positions=token_ids
    )
    if phase == Phase.GRPO:
        ref = tokens if cfg.grpo.beta > 0 else None
        batch = dataclasses.replace(batch, old_logprobs=tokens, advantages=tokens, ref_logprobs=ref)
    batch = fns.abstract_batch(batch)
    step = fns.sft_step if phase == Phase.SFT else fns.grpo_step
    resident = _train_resident(ctx, phase)
    analytic = {k: ctx.analytic[k] for k in ("params", "optimizer state", "frozen base") if k in ctx.analytic}
    arguments = {"params": state.params, "optimizer state": state.opt_state, "batch": batch}
    if ctx.frozen:
        arguments["frozen base"] = ctx.frozen
    extra, packed_note = packed_bound(shape, shard_bytes(state.params))
    plan = memory_of(f"{phase}_step", step.lower(state, batch), arguments, resident | extra, analytic)
    plan.notes.append(packed_note)
    if ctx.frozen:
        plan.notes.append(_lora_note(ctx, plan.arguments["optimizer state"]))
    plan.notes.append(attention_note(cfg, ctx.model, ctx.mesh, micro_rows, shape[-1]))
    row_devices = shards(ctx.mesh, *ROW_AXES)
    if micro_rows % row_devices:
        plan.notes.append(
            f"{micro_rows} rows per micro-batch do not split over {row_devices} row devices "
            f"(data x fsdp x expert): every device computes all of them; use a multiple of {row_devices}"
        )
    return plan


def _train_resident(ctx: PlanContext, phase: Phase) -> dict[str, int]:
    """Resident beside a GRPO step: the sampler's weights (split placement: the hand-over's scratch,
    one sampler shard per train device, kept between hand-overs) and the KL reference."""
    if phase != Phase.GRPO:
        return {}
    sampler = "hand-over scratch" if ctx.split else "sampler weights"
    resident = {sampler: shard_bytes(ctx.sampler_weights.split(ctx.sampler_state)[1])}
    if ctx.cfg.grpo.beta > 0:
        resident["KL reference params"] = ctx.reference_bytes()
    return resident


def _lora_note(ctx: PlanContext, optimizer_bytes: int) -> str:
    """How far the adapters shrink the optimizer state against full fine-tuning on the same mesh."""
    trained = sum(x.size for x in jax.tree.leaves(ctx.params))
    total = ctx.model.num_params()
    full = 2 * total * jnp.dtype(DTYPES[ctx.cfg.model.param_dtype]).itemsize
    full //= shards(ctx.mesh, *MESH_AXES)
    return (
        f"LoRA trains {trained / 1e6:.1f}M of {total / 1e9:.2f}B parameters ({trained / total:.2%}): "
        f"optimizer state {optimizer_bytes / GIB:.3f} GiB instead of {full / GIB:.1f} GiB (full fine-tuning)"
    )


def _refresh(ctx: PlanContext) -> ProgramMemory:
    """The jitted cast + reshard of the training weights into the sampler's (donated) copy."""
    weights = ctx.sampler_weights
    low = weights.refresh_own.lower(weights.split(ctx.train_layout)[1], weights.split(ctx.sampler_state)[1])
    return memory_of(
        "sampler_refresh",
        low,
        {
            "params": weights.split(ctx.train_layout)[1],
            "sampler weights": weights.split(ctx.sampler_state)[1],
        },
        refresh_resident(ctx),
        {k: ctx.analytic[k] for k in ("params", "sampler weights")},
    )


def refresh_resident(ctx: PlanContext) -> dict[str, int]:
    """Resident beside the weights' refresh (or hand-over) on a device that trains: the rest of the
    train state (the optimizer's moments, LoRA's frozen base) and the KL reference."""
    resident = {"optimizer state": ctx.analytic["optimizer state"]}
    if ctx.frozen:
        resident["frozen base"] = shard_bytes(ctx.frozen)
    if ctx.cfg.grpo.beta > 0:
        resident["KL reference params"] = ctx.reference_bytes()
    return resident


def abstract_rollout_arrays(ctx: PlanContext) -> tuple[Any, Any]:
    """The sampler's abstract KV cache (a pool of rollout.pool_pages pages) and next-token logits,
    laid out on the plan's mesh."""
    cfg = ctx.cfg
    pages = (cfg.rollout.page_size, cfg.rollout.pool_pages)
    return abstract_outputs(
        lambda: new_rollout_arrays(
            ctx.model, cfg.rollout.batch_rows, cfg.cache_len, DTYPES[cfg.cache_dtype], pages, ctx.mesh
        ),
        mesh=ctx.mesh,
    )


def rollout_lowered(ctx: PlanContext, only: tuple[str, ...]) -> tuple[dict[str, Any], Any]:
    """The sampler's prefill (every row taking a full chunk) and decode segment (a full turn) of
    `only`, lowered for the plan's mesh on the recipe's page pool (decode steps read it by the
    Pallas kernel on TPU), and the abstract cache they take."""

    cfg, mesh, rows = ctx.cfg, ctx.mesh, ctx.cfg.rollout.batch_rows
    prefill, decode = compiled_functions(ctx.graphdef, None, program_platform(mesh))
    cache, next_logits = abstract_rollout_arrays(ctx)
    i32, f32 = jnp.int32, jnp.float32
    sds = jax.ShapeDtypeStruct
    vec = lambda dtype: sds((rows,), dtype)  # noqa: E731

    params = SamplingArrays(
        temperature=vec(f32), top_p=vec(f32), top_k=vec(i32), seed=vec(i32), stream=vec(i32)
    )
    key = jax.eval_shape(lambda: jax.random.key(0))
    # Every row takes a full chunk (the first admission); on a mesh the engine passes rows=None.
    prefill_args = (
        None if mesh is not None else vec(i32),
        sds((rows, cfg.rollout.prefill_chunk), i32),
        vec(i32),
        cache,
        next_logits,
        vec(jnp.bool_),
    )
    decode_args = (cache, next_logits, vec(jnp.bool_), vec(i32), params, sds((2,), i32), key)
    lowered = {}
    if "rollout_prefill" in only:
        lowered["rollout_prefill"] = on_mesh(prefill, mesh).lower(ctx.sampler_state, *prefill_args)
    if "rollout_decode" in only:
        lowered["rollout_decode"] = on_mesh(decode, mesh).lower(
            ctx.sampler_state, *decode_args, max_steps=decode_bucket(cfg.rollout.max_turn_tokens)
        )
    return lowered, cache


def rollout_memory(ctx: PlanContext, only: tuple[str, ...]) -> Iterator[ProgramMemory]:
    """Memory of the rollout programs of `only` (`rollout_lowered`), each as it compiles."""
    lowered, cache = rollout_lowered(ctx, only)
    resident = _rollout_resident(ctx)
    analytic = {k: ctx.analytic[k] for k in ("sampler weights", "KV cache")}
    groups = {"sampler weights": ctx.sampler_state, "KV cache": cache}
    for name, low in lowered.items():
        yield memory_of(name, low, groups, resident, analytic)


def _rollout_resident(ctx: PlanContext) -> dict[str, int]:
    """Resident beside the sampler's programs: the train state and KL reference (co-located), or on
    the rollout sub-mesh only the hand-over's filler, one train shard of each parameter per device."""
    own_train_layout = ctx.sampler_weights.split(ctx.train_layout)[1]
    if ctx.split:
        return {"hand-over filler": shard_bytes(own_train_layout)}
    resident = {"train state (params + Adam)": ctx.analytic["params"] + ctx.analytic["optimizer state"]}
    unshared = shard_bytes(ctx.frozen) - shard_bytes(ctx.sampler_weights.split(ctx.train_layout)[0])
    if ctx.frozen and unshared:  # a mesh laying the base out otherwise than the sampler
        resident["frozen base (training layout)"] = unshared
    if ctx.cfg.grpo.beta > 0:
        resident["KL reference params"] = ctx.reference_bytes()
    return resident


# the split placement compiles the weight hand-over in place of the refresh (b2tjax/plan/split_plan.py)
PROGRAMS = (
    "sft_step",
    "grpo_step",
    "sampler_refresh",
    "weight_handover",
    "rollout_prefill",
    "rollout_decode",
)


def run_programs(cfg: TrainConfig, only: tuple[str, ...] = PROGRAMS) -> tuple[str, ...]:
    """The names in `only` of the programs the run executes: SFT only with an SFT phase, the
    sampler's (refresh or hand-over, prefill, decode) for the travel task."""
    travel = cfg.task == "travel"
    runs = {
        "sft_step": cfg.mode in ("sft_grpo", "sft_only") and cfg.sft.steps > 0,
        "grpo_step": cfg.mode in ("sft_grpo", "grpo"),
        "sampler_refresh": travel and cfg.mode != "sft_only",
        "weight_handover": travel and cfg.mode != "sft_only",
        "rollout_prefill": travel,
        "rollout_decode": travel,
    }
    return tuple(name for name in PROGRAMS if name in only and runs[name])


def plan_programs(
    cfg: TrainConfig, mesh: Mesh | None, only: tuple[str, ...] = PROGRAMS
) -> Iterator[ProgramMemory]:
    """Memory of the co-located run's programs (`run_programs`; the split placement's are
    b2tjax/plan/split_plan.py's), each as soon as it is compiled (a TPU compile of a large model
    takes minutes per program)."""
    ctx = PlanContext.build(cfg, mesh)
    names = run_programs(cfg, only)
    if "sft_step" in names:
        yield train_step_memory(ctx, Phase.SFT)
    if "grpo_step" in names:
        yield train_step_memory(ctx, Phase.GRPO)
    if "sampler_refresh" in names:
        yield _refresh(ctx)
    if {"rollout_prefill", "rollout_decode"} & set(names):
        yield from rollout_memory(ctx, names)
