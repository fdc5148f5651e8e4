"""Speed benchmark: greedy decoding side by side with Tunix's sampler (`google-tunix`), same jax, same
shapes, same run.

Tunix is an optional peer, not a dependency: install it to compare (`pip install google-tunix`);
without it this prints a message and exits 0. Shapes: Qwen3-0.6B width, 2 layers,
fp32, batch 4, a 128-token prompt, 64 greedy tokens, caches of 256 and 4,096 slots. Random weights
(decoding speed does not depend on them). Per-token decode time is measured the same way on both
sides, through each one's public generation path: (time for 64 tokens - time for 1 token) / 63,
best of --repeats, so prefill and host overheads cancel; the calls of the three sides are
interleaved (A, B, C, A, B, C...), so load from other work on a shared machine falls on all alike.
Each time is taken twice: wall clock and this process' CPU time (all its threads; on a loaded
machine the CPU time leaves out the waits for a core, so it moves less between calls). Prefill
is the 1-token call less one decode step: the prompt's forward pass plus the call's host work.

    python benchmarks/bench_vs_tunix.py [--slots 256 4096] [--batch 4] [--prompt 128] [--new 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models.config import get_config
from models.greedy import greedy_generate
from models.kv_cache import init_cache
from models.qwen3 import Qwen3ForCausalLM
from rollout.programs import ModelRunner
from rollout.sampling import SamplingArrays


def interleaved_best(
    runs: dict[object, Callable[[], object]], repeats: int, warmup: int = 1
) -> tuple[dict, dict, dict]:
    """Best wall seconds and best process CPU seconds (every thread of this process: what a call
    computed, less the time it waited for a core) per call of each of `runs`, the calls
    interleaved A, B, C, A, B, C... so load from other work on a shared machine falls on every
    side alike; after `warmup` calls each (which compile). Each call must return host values (so
    it has finished). Returns (wall, cpu, what each first warm-up call returned)."""
    first = {name: run() for name, run in runs.items()}
    for _ in range(warmup - 1):
        for run in runs.values():
            run()
    wall = dict.fromkeys(runs, float("inf"))
    cpu = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            wall[name] = min(wall[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
    return wall, cpu, first


class Timing(NamedTuple):
    """One side's seconds: decode per token (wall, CPU) and prefill (wall, CPU)."""

    decode: float
    decode_cpu: float
    prefill: float
    prefill_cpu: float


def per_token(runners: dict[str, Callable[[int], object]], new: int, repeats: int) -> dict[str, Timing]:
    """Each runner's seconds per decoded token, (time(new) - time(1)) / (new - 1), and its prefill,
    time(1) less one token, in wall and CPU time; all calls of all runners interleaved, best of
    `repeats`."""
    calls = {(name, n): functools.partial(run, n) for name, run in runners.items() for n in (new, 1)}
    wall, cpu, _ = interleaved_best(calls, repeats)
    out = {}
    for name in runners:
        step = max(wall[name, new] - wall[name, 1], 0.0) / (new - 1)
        step_cpu = max(cpu[name, new] - cpu[name, 1], 0.0) / (new - 1)
        out[name] = Timing(step, step_cpu, wall[name, 1] - step, cpu[name, 1] - step_cpu)
    return out


class IdTokenizer:
    """The few methods Tunix's TokenizerAdapter needs; text is space-separated token ids. bos_id 0
    tells Tunix's sampler not to prepend one, so both sides see the same prompt length."""

    def encode(self, text: str, **_) -> list[int]:
        return [int(t) for t in text.split()]

    def decode(self, ids, **_) -> str:
        return " ".join(str(int(i)) for i in ids)

    def bos_id(self) -> int:
        return 0

    def eos_id(self) -> int:
        return 2

    def pad_id(self) -> int:
        return 0


def engine_runner(model: Qwen3ForCausalLM, prompt: np.ndarray, slots: int) -> Callable[[int], object]:
    """The RolloutEngine's jitted prefill + decode segment (rollout.programs.ModelRunner), greedy."""
    runner = ModelRunner(model)
    b, p = prompt.shape
    vocab = model.config.vocab_size
    params = SamplingArrays(
        temperature=jnp.zeros(b),
        top_p=jnp.ones(b),
        top_k=jnp.zeros(b, jnp.int32),
        seed=jnp.zeros(b, jnp.int32),
        stream=jnp.zeros(b, jnp.int32),
    )
    no_stop = jnp.asarray([-1, -1], jnp.int32)  # the engine stops on ids; none can match

    def run(new: int):
        cache = init_cache(model.config, b, slots)
        logits = jnp.zeros((b, vocab), jnp.float32)
        rows = jnp.arange(b, dtype=jnp.int32)
        logits, cache, _ = runner.prefill(
            runner.state,
            rows,
            jnp.asarray(prompt),
            jnp.full((b,), p, jnp.int32),
            cache,
            logits,
            jnp.zeros(b, bool),
        )
        out = runner.decode(
            runner.state,
            cache,
            logits,
            jnp.ones(b, bool),
            jnp.full((b,), new, jnp.int32),
            params,
            no_stop,
            jax.random.key(0),
            max_steps=64,
        )
        return np.asarray(out[0])

    return run


def greedy_runner(model: Qwen3ForCausalLM, prompt: np.ndarray, slots: int) -> Callable[[int], object]:
    lens = jnp.full((prompt.shape[0],), prompt.shape[1], jnp.int32)
    return lambda new: np.asarray(greedy_generate(model, jnp.asarray(prompt), lens, new, max_len=slots))


def tunix_model_config(cfg, dtype=jnp.float32):
    """Tunix's Qwen3 config of the shape of our config `cfg` (compute `dtype`, fp32 params)."""
    from tunix.models.qwen3 import model as tunix_qwen3

    return tunix_qwen3.ModelConfig(
        num_layers=cfg.num_hidden_layers,
        vocab_size=cfg.vocab_size,
        embed_dim=cfg.hidden_size,
        hidden_dim=cfg.intermediate_size,
        num_heads=cfg.num_attention_heads,
        head_dim=cfg.head_dim,
        num_kv_heads=cfg.num_key_value_heads,
        rope_theta=int(cfg.rope_theta),
        norm_eps=cfg.rms_norm_eps,
        use_tied_embedding=cfg.tie_word_embeddings,
        dtype=dtype,
        param_dtype=jnp.float32,
    )


def tunix_runner(cfg, prompt: np.ndarray, slots: int) -> Callable[[int], object]:
    from tunix.generate import sampler as tunix_sampler
    from tunix.models.qwen3 import model as tunix_qwen3

    model = tunix_qwen3.Qwen3(tunix_model_config(cfg), rngs=nnx.Rngs(0))
    cache = tunix_sampler.CacheConfig(
        cache_size=slots,
        num_layers=cfg.num_hidden_layers,
        num_kv_heads=cfg.num_key_value_heads,
        head_dim=cfg.head_dim,
    )
    sampler = tunix_sampler.Sampler(model, IdTokenizer(), cache)
    texts = [" ".join(str(int(i)) for i in row) for row in prompt]

    def run(new: int):
        return sampler(
            texts,
            max_generation_steps=new,
            max_prompt_length=prompt.shape[1],
            temperature=0.0,
            eos_tokens=[-1],
        ).text

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, nargs="+", default=[256, 4096], help="cache lengths")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=64, help="greedy tokens per row (<= 64)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if importlib.util.find_spec("tunix") is None:
        print("Tunix is not installed: `pip install google-tunix` to run this comparison. Skipped.")
        return
    if not 2 <= args.new <= 64 or any(s < args.prompt + args.new for s in args.slots):
        parser.error("need 2 <= --new <= 64 and every --slots >= --prompt + --new")
    cfg = dataclasses.replace(get_config("qwen3-0.6b"), num_hidden_layers=args.layers)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    prompt = np.random.default_rng(0).integers(3, cfg.vocab_size, (args.batch, args.prompt), dtype=np.int32)

    print(
        f"\nQwen3-0.6B width, {args.layers} layers, fp32, batch {args.batch}, prompt {args.prompt}, "
        f"{args.new} greedy tokens, {jax.devices()[0].platform}, best of {args.repeats} interleaved; "
        "ms (lower is better); vs Tunix = Tunix's time / this side's"
    )
    print(
        f"| {'slots':>6} | {'side':<15} | {'prefill':>8} | {'decode/token':>12} | {'vs Tunix':>8} "
        f"| {'CPU prefill':>11} | {'CPU decode/token':>16} | {'vs Tunix':>8} |"
    )
    print(f"|{'-' * 8}|{'-' * 17}|{'-' * 10}|{'-' * 14}|{'-' * 10}|{'-' * 13}|{'-' * 18}|{'-' * 10}|")
    for slots in args.slots:
        runners = {
            "Tunix": tunix_runner(cfg, prompt, slots),
            "RolloutEngine": engine_runner(model, prompt, slots),
            "greedy_generate": greedy_runner(model, prompt, slots),
        }
        times = per_token(runners, args.new, args.repeats)
        base = times["Tunix"]
        for name, t in times.items():
            print(
                f"| {slots:>6} | {name:<15} | {t.prefill * 1e3:>8.1f} | {t.decode * 1e3:>12.1f} "
                f"| {base.decode / t.decode:>7.2f}x | {t.prefill_cpu * 1e3:>11.1f} "
                f"| {t.decode_cpu * 1e3:>16.1f} | {base.decode_cpu / t.decode_cpu:>7.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
