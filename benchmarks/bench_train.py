"""Speed benchmark: train-step throughput and model FLOPs utilisation (MFU), on whatever JAX backend is
present.

    python benchmarks/bench_train.py                                   # tiny model, CPU
    python benchmarks/bench_train.py --preset qwen3-0.6b --batch 8 --seq 2048 --dtype bfloat16   # GPU/TPU

Model FLOPs per step = 6 * N_matmul * tokens + attention (12 * layers * heads * head_dim * T per
token, fwd + bwd, full T^2 as is convention), N_matmul = parameters that take part in matmuls (the
embedding lookup does not; a tied embedding counts once, as the LM head). The peak is what a large
matmul in the compute dtype reaches in this same run on this device, so MFU is relative to a
measured, not a datasheet, number. The GRPO step (loss + grads + AdamW) is timed with one and with
several micro-batches, the latter as a ratio to the former.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from b2tjax.config import GRPOConfig
from b2tjax.step.batch import TrainBatch
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
from models.config import get_config
from models.qwen3 import DTYPES, create_model
from models.settings import ModelRuntime


def matmul_peak(dtype, size: int, repeats: int) -> float:
    """FLOP/s of a [size, size] @ [size, size] matmul chain in `dtype` (the run's reference)."""
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32).astype(dtype) / size**0.5

    @jax.jit
    def chain(x):
        for _ in range(8):
            x = jnp.dot(x, b, preferred_element_type=jnp.float32).astype(dtype)
        return x

    chain(a).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        chain(a).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 8 * 2 * size**3 / best


def model_flops_per_token(cfg, seq: int) -> float:
    matmul_params = cfg.num_params() - (0 if cfg.tie_word_embeddings else cfg.vocab_size * cfg.hidden_size)
    attention = 12 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * seq
    return 6 * matmul_params + attention


def time_step(fns, state, batch, repeats: int) -> tuple[float, object]:
    state, metrics = fns.grpo_step(state, batch)  # compile + warm up
    jax.block_until_ready(metrics)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = fns.grpo_step(state, batch)
        jax.block_until_ready((state.params, metrics))
        times.append(time.perf_counter() - start)
    return float(np.median(times)), state


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--micro", type=int, default=4, help="micro-batches of the accumulation row")
    parser.add_argument(
        "--dtype",
        default=None,
        choices=("float32", "bfloat16"),
        help="compute dtype (default: bfloat16 on GPU/TPU, float32 on CPU)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--matmul", type=int, default=None, help="size of the peak matmul")
    return parser.parse_args(argv)


def random_batch(vocab_size: int, n: int, t: int) -> dict[str, np.ndarray]:
    """A GRPO batch of n random sequences of t tokens (seed 0), the first quarter a mask-0 prompt."""
    rng = np.random.default_rng(0)
    flat = {
        "ids": rng.integers(0, vocab_size, (n, t)).astype(np.int32),
        "mask": np.ones((n, t), np.float32),
        "old_logprobs": np.full((n, t), -np.log(vocab_size), np.float32),
        "advantages": rng.normal(size=n).astype(np.float32),
    }
    flat["mask"][:, : t // 4] = 0  # a prompt
    return flat


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    platform = jax.devices()[0].platform
    dtype_name = args.dtype or ("float32" if platform == "cpu" else "bfloat16")
    dtype = DTYPES[dtype_name]
    size = args.matmul or (1024 if platform == "cpu" else 8192)
    cfg = get_config(args.preset)
    model = create_model(cfg, None, seed=0, runtime=ModelRuntime(dtype=dtype, param_dtype=jnp.float32))
    model_fn, params = BoundModel.from_model(model)
    optimizer = optax.adamw(1e-5)
    fns = make_step_fns(
        model_fn,
        optimizer,
        lambda s: 1e-5,
        GRPOConfig(aggregation="token_mean", logprob_chunk=256),
        temperature=1.0,
        fixed_length=args.seq,
    )
    n, t = args.batch, args.seq
    flat = random_batch(cfg.vocab_size, n, t)
    tokens = n * t
    flops = model_flops_per_token(cfg, t) * tokens

    peak = matmul_peak(dtype, size, args.repeats)
    rows = []
    for micro in (1, args.micro):
        if n % micro:
            continue
        state = init_train_state(jax.tree.map(jnp.copy, params), optimizer)
        batch = fns.shard_batch(TrainBatch(**flat).split(micro))
        seconds, _ = time_step(fns, state, batch, args.repeats)
        rows.append((f"GRPO step, {micro} micro-batch{'es' if micro > 1 else ''}", seconds))

    print(
        f"device: {jax.device_count()} x {jax.devices()[0].device_kind} ({platform}); compute {dtype_name}; "
        f"model {args.preset} ({cfg.num_params() / 1e6:.2f}M params); batch {n} x {t} tokens"
    )
    print(f"reference: {size}x{size} matmul chain = {peak / 1e12:.3f} TFLOP/s (measured peak)")
    print(f"{'what':<30} {'step s':>9} {'tokens/s':>11} {'TFLOP/s':>9} {'MFU':>7} {'vs 1 micro':>11}")
    base = rows[0][1]
    for name, seconds in rows:
        rate = flops / seconds
        print(
            f"{name:<30} {seconds:>9.4f} {tokens / seconds:>11.0f} {rate / 1e12:>9.4f} "
            f"{100 * rate / peak:>6.1f}% {base / seconds:>10.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
