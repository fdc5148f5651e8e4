"""Speed benchmark: one GRPO train step (forward, backward, AdamW) side by side with Tunix's GRPO
learner update, same jax, same shapes, same run; plus the sampler-vs-trainer log-prob gap of each.

Tunix is an optional peer, not a dependency (run this with a Python that has `google-tunix`;
without it this prints a message and exits 0).

Train step. Tunix: the update its GRPOLearner runs per mini-batch -- the actor trainer
(`tunix.rl.trainer.Trainer`, a PeftTrainer) with the registered `grpo` policy loss wired as
`GRPOLearner.__init__` wires it, jitted by `PeftTrainer.jit_train_and_eval_step` (nnx.jit, the
optimizer donated), called on a `TrainExample` of prompt and completion ids. Ours:
`b2tjax.step.train_step.make_step_fns(...).grpo_step` on a `TrainBatch` of the same rows (prompt then
completion ids, the mask on the completion, the output head projected at the completion's positions only
(`TrainBatch.positions`, as the trainer lays them out). Both: Qwen3-0.6B width with --layers layers, random
weights, fp32 master weights, compute in --dtype, beta 0 (no reference model), one iteration
(ratio 1), epsilon 0.2, sequence-mean-token-mean aggregation, entropy logged, AdamW 1e-5. At ratio 1
both losses equal -mean(advantages), printed as a check that they aggregate alike. Timed: the
jitted step alone, after two warm-up calls each (Tunix's step compiles again on its second call),
interleaved A/B, best of --repeats, in wall time (tokens/s = rows x (prompt +
completion) / wall) and in process CPU time (what a step computed on all threads, less the time it
waited for a core: the steadier number on a shared machine).

Log-prob gap. Each side samples with its own sampler (T = 1) and recomputes the sampled tokens'
log-probs with its own trainer pass on the same records: ours is bench_logprob_gap.py's
measurement (the RolloutEngine, tiny Qwen3 on the lookup task); Tunix's samples with its
`Sampler(return_logprobs=True)` and recomputes with `tunix.rl.common.compute_per_token_logps`, the
function its GRPO loss calls, on a Tunix Qwen3 of the same tiny shape.

    python benchmarks/bench_vs_tunix_train.py [--rows 4] [--prompt 64] [--completion 64] \
        [--dtype float32] [--logprob-chunk 128] [--repeats 3] [--with-full-head] [--no-gap]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import tempfile
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from bench_logprob_gap import gap  # benchmarks/ is the script directory, first on sys.path
from bench_vs_tunix import IdTokenizer, interleaved_best, tunix_model_config
from flax import nnx

from b2tjax.config import GRPOConfig
from b2tjax.step.batch import TrainBatch, loss_positions
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
from models.config import get_config
from models.hf import save_pretrained
from models.qwen3 import DTYPES, create_model
from models.settings import ModelRuntime

PAD, EOS = 0, 2  # Tunix's pad and eos ids; the random ids avoid both


def twin_models(cfg, dtype) -> tuple[nnx.Module, nnx.Module]:
    """Our Qwen3 (random, seed 0) and Tunix's Qwen3 with the same weights: ours is written as a
    Hugging Face checkpoint (models/hf.py) and read by Tunix's own safetensors loader."""
    from tunix.models.qwen3 import params as tunix_params

    ours = create_model(cfg, None, seed=0, runtime=ModelRuntime(dtype=dtype, param_dtype=jnp.float32))
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(ours, tmp, dtype=np.float32)
        theirs = tunix_params.create_model_from_safe_tensors(tmp, tunix_model_config(cfg, dtype))
    return ours, theirs


def tunix_step(model: nnx.Module, prompt: np.ndarray, completion: np.ndarray, adv: np.ndarray) -> Callable:
    """Tunix's jitted GRPO update on these rows; each call is one optimizer step -> (loss, grad norm)."""
    from tunix.rl import function_registry
    from tunix.rl.grpo import grpo_learner
    from tunix.rl.trainer import Trainer
    from tunix.sft.peft_trainer import TrainingConfig

    trainer = Trainer(
        model,
        optax.adamw(1e-5),
        TrainingConfig(eval_every_n_steps=1_000_000),
        custom_checkpoint_metadata_fn=dict,
    )
    algo = grpo_learner.GRPOConfig(num_generations=2, num_iterations=1, beta=0.0, epsilon=0.2)
    algo.temperature = 1.0  # what GRPOLearner copies from the rollout config
    policy_loss = function_registry.get_policy_loss_fn(algo.policy_loss_fn)
    trainer.with_loss_fn(
        lambda m, train_example, algo_config: policy_loss(
            m, train_example, algo_config=algo, pad_id=PAD, eos_id=EOS
        ),
        has_aux=True,
    )
    trainer.with_gen_model_input_fn(lambda x: {"train_example": x, "algo_config": algo})
    step, _ = trainer.jit_train_and_eval_step(cache_nnx_graph=True)
    example = grpo_learner.TrainExample(
        prompt_ids=jnp.asarray(prompt),
        prompt_mask=jnp.asarray(prompt != PAD),
        completion_ids=jnp.asarray(completion),
        completion_mask=jnp.asarray(completion != PAD),
        advantages=jnp.asarray(adv),
        ref_per_token_logps=None,
        old_per_token_logps=None,
    )

    def run() -> tuple[float, float]:
        loss, _, grad_norm = step(example)
        return float(loss), float(grad_norm)

    return run


def our_step(
    model: nnx.Module,
    prompt: np.ndarray,
    completion: np.ndarray,
    adv: np.ndarray,
    chunk: int = 128,
    gather: bool = True,
) -> Callable:
    """Our jitted GRPO step on the same rows (one micro-batch); each call is one optimizer step ->
    (loss, grad norm). `gather`: the output head at the completion's positions only (the
    trainer's TrainBatch.positions), else at every token."""
    model_fn, params = BoundModel.from_model(model)
    params = jax.tree.map(jnp.copy, params)  # the step donates its state: keep the model's weights
    optimizer = optax.adamw(1e-5)
    grpo_cfg = GRPOConfig(
        aggregation="seq_mean_token_mean", clip_low=0.2, clip_high=0.2, beta=0.0, logprob_chunk=chunk
    )
    ids = np.concatenate([prompt, completion], axis=1)
    fns = make_step_fns(
        model_fn, optimizer, lambda s: 1e-5, grpo_cfg, temperature=1.0, fixed_length=ids.shape[1]
    )
    mask = np.zeros(ids.shape, np.float32)
    mask[:, prompt.shape[1] :] = 1.0
    state = init_train_state(params, optimizer)
    positions = loss_positions(mask) if gather else None  # as b2tjax.grpo.update lays them out
    old = np.asarray(fns.logprobs(state.params, jnp.asarray(ids[None]), None))[0]  # ratio 1, as Tunix's
    flat = TrainBatch(ids=ids, mask=mask, old_logprobs=old, advantages=adv, positions=positions)
    batch = fns.shard_batch(flat.split(1))
    box = [state]

    def run() -> tuple[float, float]:
        box[0], metrics = fns.grpo_step(box[0], batch)
        return float(metrics["loss"]), float(metrics["grad_norm"])

    return run


def train_table(args) -> None:
    dtype = DTYPES[args.dtype]
    cfg = dataclasses.replace(get_config(args.preset), num_hidden_layers=args.layers)
    rng = np.random.default_rng(0)
    prompt = rng.integers(3, cfg.vocab_size, (args.rows, args.prompt), dtype=np.int32)
    completion = rng.integers(3, cfg.vocab_size, (args.rows, args.completion), dtype=np.int32)
    adv = rng.normal(size=args.rows).astype(np.float32)
    ours, theirs = twin_models(cfg, dtype)
    runs = {
        "Tunix GRPO learner": tunix_step(theirs, prompt, completion, adv),
        "b2tjax grpo_step": our_step(ours, prompt, completion, adv, args.logprob_chunk),
    }
    if args.with_full_head:
        full = our_step(ours, prompt, completion, adv, args.logprob_chunk, gather=False)
        runs["b2tjax grpo_step, head at every token"] = full
    best, cpu, first = interleaved_best(runs, args.repeats, warmup=2)  # Tunix's 2nd call recompiles
    tokens = args.rows * (args.prompt + args.completion)
    print(
        f"\nGRPO train step: {args.preset} width, {args.layers} layers, {args.dtype} compute, "
        f"{args.rows} rows x ({args.prompt} prompt + {args.completion} completion) tokens, "
        f"{jax.devices()[0].platform}; our logprob_chunk {args.logprob_chunk}; best of {args.repeats}, "
        f"interleaved; -mean(adv) = {-adv.mean():.6f}"
    )
    print(
        "| step | s / step | tokens/s | vs Tunix | CPU s / step | vs Tunix (CPU) | first loss "
        "| first grad norm |"
    )
    print("|---|---|---|---|---|---|---|---|")
    base, base_cpu = best["Tunix GRPO learner"], cpu["Tunix GRPO learner"]
    for name, seconds in best.items():
        loss, norm = first[name]
        print(
            f"| {name} | {seconds:.3f} | {tokens / seconds:,.0f} | {base / seconds:.2f}x "
            f"| {cpu[name]:.2f} | {base_cpu / cpu[name]:.2f}x | {loss:.6f} | {norm:.6g} |"
        )


def tunix_gap(dtype_name: str, episodes: int, tokens: int) -> tuple[float, float, int]:
    """(mean, max) |sampler - trainer| over Tunix's sampled tokens, and their count: its Sampler at
    T = 1 (top-p 1.0, so the plain categorical draw), then `compute_per_token_logps` (what its GRPO
    loss calls) on the sampled rows, with the tiny model bench_logprob_gap.py uses (same weights
    as ours). Two prompts of 32 random ids, each sampled episodes / 2 times in one batch. A row is
    compared up to its first sampled pad id (Tunix's trainer treats pad ids as absent)."""
    from tunix.generate import sampler as tunix_sampler
    from tunix.rl import common

    cfg = dataclasses.replace(get_config("tiny"), vocab_size=2048, initializer_range=0.1)
    _, model = twin_models(cfg, DTYPES[dtype_name])
    prompts = np.random.default_rng(1).integers(3, cfg.vocab_size, (2, 32))
    texts = [" ".join(map(str, prompts[i % 2])) for i in range(episodes)]
    cache = tunix_sampler.CacheConfig(
        cache_size=32 + tokens,
        num_layers=cfg.num_hidden_layers,
        num_kv_heads=cfg.num_key_value_heads,
        head_dim=cfg.head_dim,
    )
    out = tunix_sampler.Sampler(model, IdTokenizer(), cache)(
        texts,
        tokens,
        max_prompt_length=32,
        temperature=1.0,
        top_p=1.0,
        seed=0,
        return_logprobs=True,
        eos_tokens=[-1],
    )
    completion = np.stack([np.asarray(t) for t in out.tokens]).astype(np.int32)
    graphdef, state = nnx.split(model)
    trainer = common.compute_per_token_logps(
        graphdef, state, jnp.asarray(out.padded_prompt_tokens), jnp.asarray(completion), PAD, EOS
    )
    diffs = []
    for row, sampled in enumerate(out.logprobs):
        n = int(np.argmax(completion[row] == PAD)) if (completion[row] == PAD).any() else tokens
        diffs.append(np.abs(np.asarray(sampled[:n]) - np.asarray(trainer)[row, :n]))
    every = np.concatenate(diffs)
    return float(every.mean()), float(every.max()), every.size


def gap_table(episodes: int, tokens: int) -> None:
    print(
        f"\nSampler vs trainer log-probs, same records, T = 1: {episodes} episodes x {tokens} sampled "
        f"tokens, tiny Qwen3 (2 layers, hidden 64, vocab 2048)"
    )
    print("| side | compute dtype | sampled tokens | mean abs gap | max abs gap |\n|---|---|---|---|---|")
    for dtype in ("float32", "bfloat16"):
        sides = {"b2tjax (RolloutEngine vs position_logprobs)": gap(dtype, episodes, tokens)}
        sides["Tunix (Sampler vs compute_per_token_logps)"] = tunix_gap(dtype, episodes, tokens)
        for side, (mean, worst, count) in sides.items():
            print(f"| {side} | {dtype} | {count} | {mean:.2e} | {worst:.2e} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--completion", type=int, default=64)
    parser.add_argument("--preset", default="qwen3-0.6b", help="model width (models/config.py)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--logprob-chunk",
        type=int,
        default=128,
        help="our grpo.logprob_chunk (default 128, the config's): sequences longer than one chunk are "
        "projected chunk by chunk, rematerialised (bounded memory, one more head matmul)",
    )
    parser.add_argument(
        "--with-full-head",
        action="store_true",
        help="also time our step with the output head projected at every token (no "
        "TrainBatch.positions), as before the trainer gathered the trained positions",
    )
    parser.add_argument("--no-gap", action="store_true", help="skip the log-prob gap table")
    args = parser.parse_args()
    if importlib.util.find_spec("tunix") is None:
        print("Tunix is not installed: `pip install google-tunix` to run this comparison. Skipped.")
        return
    if min(args.rows, args.prompt, args.completion, args.repeats) < 1:
        parser.error("--rows, --prompt, --completion and --repeats must be >= 1")
    train_table(args)
    if not args.no_gap:
        gap_table(episodes=16, tokens=64)


if __name__ == "__main__":
    main()
