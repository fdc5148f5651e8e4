"""The training config's schema: one dataclass per YAML section, every knob with its allowed values.

Each field's annotation is its type, for a choice its allowed values (`Literal`) and for a number
its range (`Annotated[int, Range(ge=0)]`, or the aliases PosInt >= 1, NonNegInt >= 0, PosFloat > 0,
NonNegFloat >= 0 of models.fields): the loader (b2tjax.config.loader) converts every value by it and
models.fields.field_errors checks it, so type, choices and range are written once, here; the comment
beside a knob says what the values mean. Rules between knobs are in b2tjax.config.checks. The
`rollout:` section is rollout.config.RolloutConfig, the object the RolloutEngine takes.

The defaults are not a recipe: they are small values every part runs with (what `TrainConfig()`
and the unit tests get). `configs/base.yaml` lists every knob at its default with its allowed
values, in sections; a recipe in configs/ starts from them, or from the recipe its `base:` key
names, and holds what differs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from b2tjax.grpo.modes import AggregationMode, CreditMode
from models.fields import NonNegFloat, NonNegInt, PosFloat, PosInt, Range
from models.frozen import Freezable
from models.settings import AttentionImpl, LoraConfig, ModelRuntime, Remat
from rollout.config import RolloutConfig
from sandbox.himap.options import HimapOptions
from sandbox.types import StrEnum

Dtype = Literal["float32", "bfloat16"]
Task = Literal["travel", "toy"]  # the agent task on `benchmark` | the digit task (b2tjax.tasks.toy)
Mode = Literal["sft_grpo", "grpo", "sft_only", "eval"]  # sft_only: baseline; eval: e.g. ReAct baseline
GRPO_MODES = ("sft_grpo", "grpo")  # the modes that train `steps` GRPO steps (the others train none)
# How a benchmark with two judges (TravelPlanner) judges plans in training and the run's evaluation:
# strict (its documented fixes; the reward trains on it) | official (the harness's verdicts, quirks
# included: what published numbers use, and launch/eval.py's default)
Judge = Literal["strict", "official"]
Agent = Literal["single", "himap"]  # one agent per episode | HiMAP team (coordinator + day executors)


class Phase(StrEnum):
    """What a step (and its metrics.jsonl row) belongs to: the two training phases a `Mode` runs,
    or an evaluation."""

    SFT = "sft"
    GRPO = "grpo"
    EVAL = "eval"


RopeKind = Literal["none", "linear", "yarn"]


@dataclass
class RopeScalingConfig(Freezable):
    """`model.rope_scaling`: RoPE scaling added to the model (models/rope.py), for random inits and
    checkpoints alike; the positions become factor x original_max_positions
    (docs/guides/long-episodes.md). A checkpoint that has its own, other scaling is refused."""

    kind: RopeKind = "none"  # none (the model's own RoPE) | linear | yarn
    factor: Annotated[float, Range(ge=1)] = 1.0  # >= 1: the context is stretched by this factor
    # >= 0: the window the model was pretrained on; 0 = the model's (32,768 for the Qwen3 releases)
    original_max_positions: NonNegInt = 0


@dataclass
class MoeTrainConfig(Freezable):
    """`model.moe`: how a Qwen3-MoE checkpoint trains (docs/concepts/moe.md); a dense model has no
    router, and a weight > 0 for one is refused when its step is built."""

    # >= 0: the Switch load-balance loss (MaxText's load_balance_loss_weight; 1 x k when balanced)
    # added to the SFT and GRPO losses times this; 0 = none
    load_balance_loss_weight: NonNegFloat = 0.0


@dataclass
class ModelConfig(Freezable):
    preset: str = "tiny"  # models.config.get_config name, used when init is "" (random init)
    init: str = ""  # "" random | "hf:DIR" (Hugging Face checkpoint) | "ckpt:DIR" (models.checkpoint)
    # Qwen3Config fields over the preset, {name: value} (e.g. {num_hidden_layers: 4}); {} = none
    overrides: dict[str, Any] = field(default_factory=dict)
    compute_dtype: Dtype = "float32"  # float32 | bfloat16 (GPU/TPU); master weights stay param_dtype
    param_dtype: Dtype = "float32"  # float32 | bfloat16: the master weights and optimizer state
    # "sentencepiece" (trained on the generated corpus, for a random init) | "qwen3" | a path. With
    # model.init, the tokenizer comes with the weights (b2tjax/run/weights_tokenizer.py): "sentencepiece"
    # yields to the checkpoint's own, any other must match it (vocabulary, special ids) or is refused.
    tokenizer: str = "sentencepiece"
    sp_vocab_size: Annotated[int, Range(ge=64)] = 1024  # the SentencePiece vocabulary trained for "tiny"
    remat: Remat = "none"  # activation rematerialisation in the layer scan: none | full | dots | dots_all
    # attention without a cache (the train steps): auto (splash on TPU, cuDNN on a GPU in bf16, xla on
    # a CPU, else reference) | reference | xla | cudnn | splash (models/layers.py ATTENTION_IMPLS)
    attention: AttentionImpl = "auto"
    # LoRA / QLoRA (models/lora.py): rank > 0 trains adapters only on a base frozen in compute_dtype
    lora: LoraConfig = field(default_factory=LoraConfig)
    rope_scaling: RopeScalingConfig = field(default_factory=RopeScalingConfig)
    moe: MoeTrainConfig = field(default_factory=MoeTrainConfig)

    def runtime(self, paged_attention: str = "auto") -> ModelRuntime:
        """How the run's model executes: the recipe's dtypes (under LoRA the frozen base is stored in
        the compute dtype: it needs no fp32 master copy), remat and attention; the platform is the
        mesh's, filled in where the model is built."""
        param_dtype = self.compute_dtype if self.lora.enabled else self.param_dtype
        return ModelRuntime(
            dtype=self.compute_dtype,
            param_dtype=param_dtype,
            remat=self.remat,
            attention=self.attention,
            paged_attention=paged_attention,
        )


@dataclass
class DataConfig(Freezable):
    data_dir: str = "data/small"  # a path: the benchmark's data directory (built by launch/make_data.py)
    world_scale: str = (
        "small"  # small | full (sandbox.world.scales): passed to launch/make_data.py when DATA is absent
    )
    # true: build data_dir (launch/make_data.py) when it does not exist, saying so (the tiny recipes);
    # false: a missing data_dir is an error, so a typo never builds and trains on a new dataset
    build_missing: bool = False
    train_split: str = "train"  # a split name of the benchmark's data
    eval_split: str = ""  # "" = the benchmark's own (B2T: test; TravelPlanner: dev, generated queries)
    # a subset of [easy, medium, hard]: the instances trained on
    difficulties: list[str] = field(default_factory=lambda: ["easy", "medium", "hard"])
    max_train_instances: NonNegInt = 0  # 0 = all
    eval_instances: NonNegInt = 8  # instances in the final evaluation table (0 = whole split)
    shuffle_seed: Annotated[int, Range(ge=0, le=2**32 - 1)] = 0  # order of the training instances
    # false: launch/plan.py and train.py refuse a recipe whose rollout.max_seq_len, max_turn_tokens or
    # sft.max_seq_len holds < 90% of the expert traces whole (DATA/trace_lengths.json); true: run anyway
    allow_truncated_traces: bool = False


@dataclass
class GRPOConfig(Freezable):
    adv_eps: PosFloat = 1e-6  # added to the group std before dividing
    scale_by_std: bool = True  # true | false: false = the "no_std" variant
    clip_low: NonNegFloat = 0.2  # PPO ratio clip below, 1 - clip_low
    clip_high: NonNegFloat = 0.28  # ratio clip above, 1 + clip_high (DAPO clip-higher)
    beta: NonNegFloat = 0.0  # KL coefficient; 0 = no reference model at all
    aggregation: AggregationMode = "seq_mean_token_mean"  # | token_mean | fixed_length (grpo.token_weights)
    fixed_length: NonNegInt = 0  # normaliser of "fixed_length"; 0 = rollout.max_seq_len
    loss_mask: bool = True  # ablation: False trains on environment tokens too
    action_penalty: bool = True  # ablation: P_action off
    format_gate: bool = True  # ablation: false pays r_c + r_upc even without R_format
    recompute_old_logprobs: bool = False  # true: a forward pass recomputes them; false: the sampler's
    mini_batches: PosInt = 1  # divides the rollout batch: optimizer steps per rollout batch and epoch
    epochs: PosInt = 1  # passes over each rollout batch
    micro_batch_size: NonNegInt = 0  # divides the mini-batch: rows per forward/backward; 0 = all
    logprob_chunk: PosInt = 128  # sequence chunk of the vocabulary projection
    # "team": every stream of an episode trains on the episode's group-normalised team reward;
    # "team_local": plus local_weight x a day executor's own normalised day score (docs/concepts/himap.md).
    credit: CreditMode = "team"
    local_weight: NonNegFloat = 0.5  # weight of the local score under "team_local"
    # Train only on the records of groups whose rewards differ (DAPO's dynamic-sampling filter): a
    # flat group's advantages are all 0, so with sparse rewards most of a step's forward/backward
    # would be spent on rows that teach nothing. Sample more prompts per step to keep the batch full.
    drop_flat_groups: bool = False
    # the records are packed back to back into rows of `row_tokens` tokens (segment-aware
    # attention, each record its own segment: b2tjax/grpo/packed.py); 0 = rollout.max_seq_len's
    # 64-token bucket
    row_tokens: NonNegInt = 0
    # packed micro-batches each take the narrowest of this many row widths (multiples of
    # row_tokens / row_widths; as many coarser ones up to a record longer than row_tokens) holding
    # their rows (b2tjax/step/packing.py); 1 = every row row_tokens
    row_widths: PosInt = 16
    # rollout.max_staleness > 0 (the decoupled objective, b2tjax/grpo/offpolicy.py): each token's
    # importance weight pi_proximal / pi_behaviour is truncated at this cap.
    is_cap: PosFloat = 2.0


@dataclass
class OptimConfig(Freezable):
    lr: PosFloat = 1e-4  # peak learning rate (linear warmup, cosine decay)
    warmup_steps: NonNegInt = 2  # linear warmup from 0 to lr
    final_lr_ratio: Annotated[float, Range(ge=0, le=1)] = 0.1  # the last step's lr / lr
    weight_decay: NonNegFloat = 0.0  # AdamW decoupled weight decay
    b1: Annotated[float, Range(ge=0, lt=1)] = 0.9  # Adam first-moment decay
    b2: Annotated[float, Range(ge=0, lt=1)] = 0.999  # Adam second-moment decay
    eps: PosFloat = 1e-8  # Adam denominator epsilon
    max_grad_norm: PosFloat = 1.0  # global-norm gradient clip


@dataclass
class SFTConfig(Freezable):
    steps: NonNegInt = 40  # 0 = no SFT warm start
    batch_size: PosInt = 4  # traces per optimizer step
    micro_batch_size: NonNegInt = 0  # divides batch_size; 0 = whole batch
    max_seq_len: Annotated[int, Range(ge=2)] = 1024  # a trace is cut to this many tokens
    max_examples: NonNegInt = 0  # 0 = all traces
    row_tokens: NonNegInt = (
        0  # traces packed into rows of this many tokens; 0 = max_seq_len's 64-token bucket
    )
    row_widths: PosInt = 16  # widths: multiples of row_tokens / row_widths, as many up to a longer record
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=2e-3, warmup_steps=4))  # as `optim:`


@dataclass
class CheckpointConfig(Freezable):
    every_steps: PosInt = 10  # GRPO steps between saves
    keep: PosInt = 2  # newest checkpoints kept
    async_save: bool = True  # true: write in the background while training goes on


@dataclass
class MeshConfig(Freezable):
    data: PosInt = 1  # data-parallel replicas
    fsdp: int = -1  # >= 1, or -1 = every device not used by the other axes
    tensor: PosInt = 1  # tensor-parallel shards (divides the heads)
    # expert-parallel shards of a Qwen3-MoE model's experts (divides num_experts); its devices are
    # data-parallel outside the experts (models/expert_parallel.py)
    expert: PosInt = 1
    # 0 = co-located (one mesh decodes and trains); N > 0 = split placement: the last N local devices
    # of every process form the rollout sub-mesh, the others the train sub-mesh (half of each
    # process's devices: the sub-meshes have the same shape; b2tjax/run/mesh.py)
    rollout_devices: NonNegInt = 0


@dataclass
class HardwareConfig(Freezable):
    """The machine a recipe is sized for; launch/plan.py checks every program fits it."""

    device_kind: str = "cpu"  # e.g. "H100 80GB", "TPU v5p" (for people; the plan uses the numbers)
    devices: PosInt = 1  # accelerator chips in the whole job
    hbm_gib: NonNegFloat = 0.0  # memory per device in GiB; 0 = not stated (the plan then reports only)
    target: str = ""  # what launch/plan.py compiles for (b2tjax/plan/targets.py: v5p-16, h100-8...); "" = cpu


@dataclass
class MetricsConfig(Freezable):
    """Experiment trackers beside OUT/metrics.jsonl and TensorBoard's OUT/tb/ (both always written)."""

    # true: also log every step to Weights & Biases (b2tjax/run/metrics.py). Off by default and never a
    # dependency: `pip install wandb` first; WANDB_MODE=offline logs to OUT/wandb/ without an account.
    wandb: bool = False
    wandb_project: str = "b2tjax"  # the W&B project the run is logged to
    wandb_run: str = ""  # the W&B run name; "" = the run directory's name


@dataclass
class ToyConfig(Freezable):
    """The digit task: prompt [BOS, k] -> the reward is 1 iff the answer token is digit k."""

    num_digits: PosInt = 10  # prompts k in [0, num_digits)
    vocab_size: int = 16  # >= 2 + 2 * num_digits (pad, BOS, digit names, digits)
    answer_len: PosInt = 1  # sampled tokens per answer


@dataclass
class TrainConfig(Freezable):
    task: Task = "travel"  # travel (an agent on `benchmark`) | toy (the digit task)
    benchmark: str = "b2t"  # a name in sandbox.benchmarks.BENCHMARKS: "b2t" | "travelplanner"
    judge: Judge = "strict"  # strict | official: how plans are judged (b2t has one judge: ignored)
    mode: Mode = "sft_grpo"  # sft_grpo | grpo | sft_only (baseline) | eval (e.g. a ReAct baseline)
    agent: Agent = "single"  # single | himap:: HiMAP episodes (the `himap:` section) for rollouts, SFT, eval
    seed: Annotated[int, Range(ge=0, le=2**63 - 1)] = 0  # model init, sampling, data order (JAX key)
    steps: NonNegInt = 12  # GRPO steps (one rollout batch each)
    out: str = "runs/tiny"  # a path: the run directory (checkpoints, logs, plots)
    log_every: PosInt = 1  # steps between metric lines
    eval_at_end: bool = True  # true: greedy evaluation on data.eval_split after training
    distributed: bool = False  # true: call jax.distributed.initialize() (multi-host TPU / multi-node GPU)
    save_records: bool = False  # true: OUT/records/step-N.jsonl keeps every GRPO step's episode records
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    toy: ToyConfig = field(default_factory=ToyConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    himap: HimapOptions = field(default_factory=HimapOptions)  # the protocol's own options type

    def get(self, dotted: str) -> Any:
        """The value at a dotted key such as 'sft.optim.lr'."""
        value: Any = self
        for part in dotted.split("."):
            value = getattr(value, part)
        return value

    @property
    def rollout_batch(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.group_size

    @property
    def cache_len(self) -> int:
        """Slots per KV-cache row of the sampler."""
        return self.rollout.cache_slots

    @property
    def cache_dtype(self) -> str:
        """The sampler's KV-cache dtype ("auto" = the model's compute dtype)."""
        auto = self.rollout.cache_dtype == "auto"
        return self.model.compute_dtype if auto else self.rollout.cache_dtype

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
