"""Speed benchmark: a first look at an accelerator: HF parity in bf16, prefill / decode speed against the
memory bandwidth bound, train-step MFU and the rollout engine's tokens/s, in one run of a few minutes.

    python benchmarks/gpu_check.py                  # GPU/TPU: a random Qwen3-0.6B (28 layers)
    python benchmarks/gpu_check.py --layers 2 --vocab 16384 --batch 2 --prompt 128 --new 16   # CPU

Everything uses random weights of the Qwen3-0.6B shape (no download). On CPU the defaults shrink
to 2 layers and a 16k vocabulary so the whole check takes about a minute.

1. parity: our model against transformers' Qwen3 (same weights, torch fp32 on the host): our fp32
   logits must match to ~1e-4; our bf16 logits are reported as error relative to the logits' spread
   and top-1 agreement.
2. prefill and decode tokens/s; decode also as a share of its bandwidth bound: every decode step
   reads all weights (bf16) and the attended KV cache once, at the copy bandwidth measured here.
3. GRPO train step (loss, grads, AdamW; bf16 compute, fp32 master weights): tokens/s and MFU against
   a bf16 matmul chain measured in the same run.
4. rollout engine: generated tokens/s over multi-turn synthetic episodes (fixed environment replies).
5. paged rollout: benchmarks/bench_rollout.py's equal-memory case, a KV page pool of whole rows
   against the same pool on more rows; on an accelerator at the Qwen3-0.6B shape (vocab: the
   bench's 2k tokenizer) with 1k-8k-token prompts in 16k-token rows, on CPU its tiny shape.
6. streaming rollouts: benchmarks/bench_streaming.py, synchronous steps vs
   rollout.max_staleness 1 and 2, and S = 1 decoding during a simulated 200 ms update in a second
   thread (the split placement's schedule; its tiny model; more rows and longer turns on an
   accelerator).

`--checks` runs a subset (e.g. `--checks paged streaming`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models.config import Qwen3Config, get_config
from models.settings import ModelRuntime


def timed(fn, repeats: int = 3) -> float:
    """Best of `repeats` calls after one warm-up (compiling) call; fn must block until done."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def copy_bandwidth(gib: float) -> float:
    """Bytes/s of an on-device copy (read + write) of a `gib` GiB array: the decode bound's speed."""
    n = int(gib * 2**30) // 4
    x = jnp.ones((n,), jnp.float32)  # fp32: CPUs emulate bf16 arithmetic, which would time compute
    copy = jax.jit(lambda a: a * 2)
    seconds = timed(lambda: copy(x).block_until_ready())
    return 2 * n * 4 / seconds


# ----------------------------------------------------------------------------------------------


def check_parity(cfg, seq: int) -> dict:
    import torch
    import transformers

    from models.hf import state_dict_to_model
    from models.qwen3 import Qwen3ForCausalLM

    torch.manual_seed(0)
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**cfg.to_hf())).eval()
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, seq), dtype=np.int64)
    with torch.no_grad():
        ref = hf(torch.from_numpy(ids)).logits.float().numpy()
    out = {}
    for name, dtype in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16)):
        ours = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=dtype))
        state_dict_to_model(ours, hf.state_dict())
        got = np.asarray(nnx.jit(lambda m, x: m(x))(ours, jnp.asarray(ids, jnp.int32)))
        err = np.abs(got - ref)
        out[name] = {
            "max_abs": float(err.max()),
            "rel": float(err.mean() / ref.std()),
            "top1": float((got.argmax(-1) == ref.argmax(-1)).mean()),
        }
    del hf
    return out


def check_generation(model, batch: int, prompt: int, new: int, bandwidth: float) -> dict:
    from models.greedy import greedy_generate
    from models.kv_cache import init_cache

    cfg = model.config
    ids = jnp.asarray(np.random.default_rng(1).integers(0, cfg.vocab_size, (batch, prompt)), jnp.int32)
    lens = jnp.full((batch,), prompt, jnp.int32)
    cache = init_cache(cfg, batch, prompt + new, jnp.bfloat16)
    prefill = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c, last_only=True)[0])
    prefill_s = timed(lambda: prefill(model, ids, lens, cache).block_until_ready())
    generate_s = timed(
        lambda: greedy_generate(model, ids, lens, new, cache_dtype=jnp.bfloat16).block_until_ready()
    )
    step_s = max(generate_s - prefill_s, 1e-9) / new
    weight_bytes = cfg.num_params() * 2  # the bf16 copy a sampler reads per step
    kv_bytes = 2 * cfg.num_hidden_layers * batch * (prompt + new) * cfg.num_key_value_heads * cfg.head_dim * 2
    bound_s = (weight_bytes + kv_bytes) / bandwidth
    return {
        "prefill_tok_s": batch * prompt / prefill_s,
        "decode_tok_s": batch / step_s,
        "step_s": step_s,
        "bound_s": bound_s,
        "weight_gb": weight_bytes / 1e9,
        "kv_gb": kv_bytes / 1e9,
    }


def check_train(cfg, batch: int, seq: int) -> dict:
    import optax

    from b2tjax.config import GRPOConfig
    from b2tjax.step.batch import TrainBatch
    from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
    from benchmarks.bench_train import matmul_peak, model_flops_per_token, time_step
    from models.qwen3 import create_model

    model = create_model(
        cfg, None, seed=0, runtime=ModelRuntime(dtype=jnp.bfloat16, param_dtype=jnp.float32, remat="full")
    )
    model_fn, params = BoundModel.from_model(model)
    optimizer = optax.adamw(1e-6)
    fns = make_step_fns(
        model_fn,
        optimizer,
        lambda s: 1e-6,
        GRPOConfig(aggregation="token_mean", logprob_chunk=512),
        temperature=1.0,
        fixed_length=seq,
    )
    rng = np.random.default_rng(0)
    flat = {
        "ids": rng.integers(0, cfg.vocab_size, (batch, seq)).astype(np.int32),
        "mask": np.ones((batch, seq), np.float32),
        "old_logprobs": np.full((batch, seq), -np.log(cfg.vocab_size), np.float32),
        "advantages": rng.normal(size=batch).astype(np.float32),
    }
    state = init_train_state(params, optimizer)
    seconds, _ = time_step(fns, state, fns.shard_batch(TrainBatch(**flat).split(1)), 3)
    peak = matmul_peak(jnp.bfloat16, 1024 if jax.devices()[0].platform == "cpu" else 8192, 3)
    flops = model_flops_per_token(cfg, seq) * batch * seq
    return {
        "tok_s": batch * seq / seconds,
        "tflops": flops / seconds / 1e12,
        "peak_tflops": peak / 1e12,
        "mfu": flops / seconds / peak,
    }


class _Ids:
    """The few tokenizer fields the engine reads; the synthetic episodes never need text."""

    name = "synthetic"

    def __init__(self, vocab: int):
        self.im_end_id, self.eos_id, self.vocab_size = vocab - 2, vocab - 1, vocab

    def decode(self, ids) -> str:
        return ""

    def turn_text(self, ids) -> str:
        return ""


def check_rollout(model, rows: int, episodes: int, prompt: int, turns: int, turn_tokens: int) -> dict:
    from rollout import RolloutConfig, RolloutEngine
    from rollout.episodes import Continue, Episode, Stop, TurnOutcome
    from sandbox.types import StopReason

    vocab = model.config.vocab_size
    rng = np.random.default_rng(2)

    class Synthetic(Episode):
        """`turns` assistant turns, each answered by a 32-token environment reply."""

        def __init__(self, i: int):
            self.instance_id, self.turn = f"synthetic-{i}", 0
            self.prompt = rng.integers(0, vocab - 2, prompt).tolist()

        def start(self):
            return [Continue("main", self.prompt)]

        def on_turn_end(self, stream, text, eos):
            self.turn += 1
            if self.turn >= turns:
                return TurnOutcome([Stop(stream, StopReason.DONE)])
            return TurnOutcome([Continue(stream, rng.integers(0, vocab - 2, 32).tolist())])

    config = RolloutConfig(
        batch_rows=rows,
        max_turns=turns,
        max_turn_tokens=turn_tokens,
        max_seq_len=prompt + turns * (turn_tokens + 40),
        temperature=1.0,
        turn_cap="close",
        prefill_chunk=512,
        cache_dtype="bfloat16",
    )
    engine = RolloutEngine(model, _Ids(vocab), config)
    engine.run([Synthetic(i) for i in range(rows)], 0)  # compile every shape
    start = time.perf_counter()
    engine.run([Synthetic(i) for i in range(episodes)], 1)
    wall = time.perf_counter() - start
    return {
        "tok_s": engine.stats.generated_tokens / wall,
        "wall": wall,
        "host_share": engine.stats.host_share,
    }


def paged_argv(cpu: bool) -> list[str]:
    """bench_rollout.py's equal-memory case: 8 prompts x G = 8; on an accelerator the realistic mix
    itself (prompts 1k-8k in 16k rows, 0.6B shape), on CPU the 1/16 scale its docs measure."""
    if cpu:
        return ["--equal-memory", "4", "--group", "2", "--batch", "2", "--paged-rows", "4"]
    return [
        *("--equal-memory", "8", "--group", "8", "--batch", "8", "--paged-rows", "32"),
        *("--prompt-min", "1024", "--prompt-max", "8192", "--max-seq-len", "16384"),
        *("--turn-tokens", "48", "--preset", "qwen3-0.6b"),
    ]


def streaming_argv(cpu: bool) -> list[str]:
    """bench_streaming.py: a few steps on CPU; more rows, steps and longer turns on an accelerator."""
    if cpu:
        shape = ("--steps", "3", "--prompts", "2", "--group", "2", "--rows", "4")
        return [*shape, "--staleness", "1", "--train-ms", "50"]
    return [
        *("--steps", "12", "--prompts", "8", "--group", "8", "--rows", "64", "--turn-tokens", "64"),
        *("--train-ms", "200"),
    ]


# ----------------------------------------------------------------------------------------------

CHECKS = ("parity", "generation", "train", "rollout", "paged", "streaming")


def parse_args(argv: list[str] | None, cpu: bool) -> argparse.Namespace:
    """Options; the defaults are a few seconds' worth on CPU and the real shapes on an accelerator."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2 if cpu else None, help="default: 28 (2 on CPU)")
    p.add_argument("--vocab", type=int, default=16384 if cpu else None, help="default: 151936 (16384 on CPU)")
    p.add_argument("--batch", type=int, default=2 if cpu else 16, help="rows of prefill/decode")
    p.add_argument("--prompt", type=int, default=128 if cpu else 2048)
    p.add_argument("--new", type=int, default=16 if cpu else 128, help="decoded tokens per row")
    p.add_argument("--train-batch", type=int, default=2 if cpu else 8)
    p.add_argument("--train-seq", type=int, default=128 if cpu else 2048)
    p.add_argument("--episodes", type=int, default=4 if cpu else 64)
    p.add_argument("--rows", type=int, default=2 if cpu else 32, help="rollout engine rows")
    p.add_argument("--checks", nargs="+", choices=CHECKS, default=list(CHECKS), help="default: all")
    return p.parse_args(argv)


def model_config(args: argparse.Namespace) -> Qwen3Config:
    """Qwen3-0.6B's shape with --layers and --vocab applied."""
    base = get_config("qwen3-0.6b")
    overrides = {k: v for k, v in (("num_hidden_layers", args.layers), ("vocab_size", args.vocab)) if v}
    if args.vocab:  # Qwen3's special ids lie outside a reduced vocabulary
        overrides.update(bos_token_id=None, eos_token_id=None)
    return dataclasses.replace(base, **overrides)


def report_train(cfg: Qwen3Config, batch: int, seq: int) -> None:
    """The `train` check's line: a GRPO train step's tokens/s and MFU."""
    train = check_train(cfg, batch, seq)
    print(
        f"GRPO train step: {train['tok_s']:,.0f} tokens/s, {train['tflops']:.3g} TFLOP/s, "
        f"MFU {train['mfu']:.1%} of the measured bf16 matmul peak {train['peak_tflops']:.3g} TFLOP/s "
        f"(batch {batch} x {seq})",
        flush=True,
    )


def run_rollout_benchmarks(checks: list[str], cpu: bool) -> None:
    """The `paged` and `streaming` checks: bench_rollout's equal-memory case and bench_streaming."""
    if "paged" in checks:
        from benchmarks import bench_rollout

        argv = paged_argv(cpu)
        print(f"paged rollout at equal cache memory: bench_rollout.py {' '.join(argv)}", flush=True)
        bench_rollout.main(argv)
    if "streaming" in checks:
        from benchmarks import bench_streaming

        argv = streaming_argv(cpu)
        print(f"streaming rollouts: bench_streaming.py {' '.join(argv)}", flush=True)
        bench_streaming.main(argv)


def main(argv: list[str] | None = None) -> int:
    cpu = jax.devices()[0].platform == "cpu"
    args = parse_args(argv, cpu)
    cfg = model_config(args)
    dev = jax.devices()[0]
    print(
        f"device: {jax.device_count()} x {dev.device_kind} ({dev.platform}); model: Qwen3-0.6B shape, "
        f"{cfg.num_hidden_layers} layers, vocab {cfg.vocab_size}, {cfg.num_params() / 1e6:.0f}M params, "
        f"random weights",
        flush=True,
    )
    started = time.perf_counter()

    if "parity" in args.checks:
        parity = check_parity(cfg, seq=128 if not cpu else 32)
        for name, r in parity.items():
            print(
                f"parity vs transformers fp32, ours {name:8s}: max |diff| {r['max_abs']:.2e}, "
                f"mean |diff| / logit std {r['rel']:.2e}, top-1 agreement {r['top1']:.1%}",
                flush=True,
            )

    from models.qwen3 import Qwen3ForCausalLM

    model = Qwen3ForCausalLM(
        cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    )
    if "generation" in args.checks:
        bandwidth = copy_bandwidth(0.25 if cpu else 4.0)
        gen = check_generation(model, args.batch, args.prompt, args.new, bandwidth)
        print(
            f"prefill: {gen['prefill_tok_s']:,.0f} tokens/s (batch {args.batch} x {args.prompt})", flush=True
        )
        print(
            f"decode:  {gen['decode_tok_s']:,.0f} tokens/s, {gen['step_s'] * 1e3:.2f} ms/step; "
            f"bandwidth bound {gen['bound_s'] * 1e3:.2f} ms/step ({gen['weight_gb']:.2f} GB weights + "
            f"{gen['kv_gb']:.2f} GB KV at {bandwidth / 1e9:.0f} GB/s measured copy bandwidth) "
            f"-> {gen['bound_s'] / gen['step_s']:.0%} of bound",
            flush=True,
        )

    if "train" in args.checks:
        report_train(cfg, args.train_batch, args.train_seq)

    if "rollout" in args.checks:
        roll = check_rollout(
            model, args.rows, args.episodes, prompt=args.prompt // 2, turns=3, turn_tokens=args.new
        )
        print(
            f"rollout engine: {roll['tok_s']:,.0f} generated tokens/s ({args.episodes} episodes x 3 turns x "
            f"{args.new} tokens through {args.rows} rows, {roll['wall']:.1f}s, "
            f"host share {roll['host_share']:.0%})",
            flush=True,
        )

    run_rollout_benchmarks(args.checks, cpu)
    print(f"gpu_check done in {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
