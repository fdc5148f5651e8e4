"""Speed benchmark: prefill and greedy-decode throughput: our jitted Qwen3 vs transformers (torch, same
weights, same machine, same run). Prints a table with the ratio ours / transformers, then our decode step
time at several *allocated* cache lengths with the same live tokens (--live, default 512): the KV cache is
updated in place and attention reads only live blocks, so it should barely grow.

    python benchmarks/bench_model.py [--config tiny] [--batch 4] [--prompt 256] [--new 64]
                                     [--cache-lengths 1024 4096 16384] [--live 512]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
import transformers
from flax import nnx

from models.config import Qwen3Config, get_config
from models.greedy import greedy_generate
from models.hf import state_dict_to_model
from models.kv_cache import init_cache
from models.qwen3 import Qwen3ForCausalLM


def best_time(fn, repeats: int) -> float:
    """Fastest of `repeats` timed calls (after one warm-up call, which compiles)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="tiny", help="preset name (models.config.PRESETS)")
    parser.add_argument("--layers", type=int, default=None, help="override num_hidden_layers")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=256, help="prefill length")
    parser.add_argument("--new", type=int, default=64, help="greedy tokens generated per row")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--cache-lengths",
        type=int,
        nargs="*",
        default=[1024, 4096, 16384],
        help="allocated cache lengths of the decode-step table (none: skip it)",
    )
    parser.add_argument("--live", type=int, default=512, help="tokens in each row's cache for that table")
    args = parser.parse_args()
    if any(s <= args.live + 16 for s in args.cache_lengths):
        parser.error("every --cache-lengths must exceed --live + 16 (the timed decode steps)")
    return args


def paired_models(
    config: str, layers: int | None
) -> tuple[Qwen3Config, transformers.Qwen3ForCausalLM, Qwen3ForCausalLM]:
    """The preset (with `layers`), a seeded random transformers model of it, ours with its weights."""
    cfg = get_config(config)
    if layers:
        cfg = dataclasses.replace(cfg, num_hidden_layers=layers)
    torch.manual_seed(0)
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**cfg.to_hf())).eval()
    ours = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    state_dict_to_model(ours, hf.state_dict())
    return cfg, hf, ours


def throughput_rows(
    cfg: Qwen3Config,
    hf: transformers.Qwen3ForCausalLM,
    ours: Qwen3ForCausalLM,
    b: int,
    p: int,
    n: int,
    repeats: int,
) -> tuple[list[tuple[str, float, float]], float]:
    """(phase, our tokens/s, transformers tokens/s) of prefill, prefill+decode and decode alone on
    b random prompts of p tokens and n greedy tokens, and the seconds our generate took to compile."""
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (b, p), dtype=np.int32)
    ids_j, ids_t = jnp.asarray(ids), torch.from_numpy(ids).long()
    lens = jnp.full((b,), p, jnp.int32)

    prefill = nnx.jit(lambda m, t, k, c: m.forward_cached(t, k, c))
    cache = init_cache(cfg, b, p + n)

    def ours_prefill():
        jax.block_until_ready(prefill(ours, ids_j, lens, cache))

    def hf_prefill():
        with torch.no_grad():
            hf(ids_t, use_cache=True)

    def ours_generate():
        jax.block_until_ready(greedy_generate(ours, ids_j, lens, n))

    def hf_generate():
        with torch.no_grad():
            hf.generate(
                ids_t, max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0
            )

    start = time.perf_counter()
    ours_generate()
    compile_s = time.perf_counter() - start
    prefill_s = [best_time(fn, repeats) for fn in (ours_prefill, hf_prefill)]  # [ours, transformers]
    generate_s = [best_time(fn, repeats) for fn in (ours_generate, hf_generate)]
    decode_s = [max(gen - pre, 1e-9) for gen, pre in zip(generate_s, prefill_s)]  # decode alone
    rows = [
        (phase, tokens / seconds[0], tokens / seconds[1])
        for phase, tokens, seconds in (
            ("prefill", b * p, prefill_s),
            ("prefill+decode", b * n, generate_s),
            ("decode only", b * n, decode_s),
        )
    ]
    return rows, compile_s


def main() -> None:
    args = parse_args()
    cfg, hf, ours = paired_models(args.config, args.layers)
    b, p, n = args.batch, args.prompt, args.new
    rows, compile_s = throughput_rows(cfg, hf, ours, b, p, n, args.repeats)
    print(
        f"\nQwen3 '{args.config}' ({cfg.num_params() / 1e6:.2f}M params, {cfg.num_hidden_layers} layers), "
        f"batch {b}, prompt {p}, {n} new tokens, fp32, {jax.devices()[0].platform}, "
        f"torch threads {torch.get_num_threads()}; our generate compile {compile_s:.1f}s"
    )
    print(f"| {'phase':<15} | {'ours tok/s':>12} | {'transformers tok/s':>18} | {'ratio':>6} |")
    print(f"|{'-' * 17}|{'-' * 14}|{'-' * 20}|{'-' * 8}|")
    for phase, ours_tps, hf_tps in rows:
        print(f"| {phase:<15} | {ours_tps:>12.0f} | {hf_tps:>18.0f} | {ours_tps / hf_tps:>5.2f}x |")
    if args.cache_lengths:
        decode_vs_allocated(ours, b, args.live, args.cache_lengths, args.repeats)


def decode_vs_allocated(
    model: Qwen3ForCausalLM, batch: int, live: int, lengths: list[int], repeats: int, steps: int = 16
) -> None:
    """Greedy decode step time with `live` tokens per row in caches of each allocated length."""
    graphdef, state = nnx.split(model)
    ones = jnp.ones((batch,), jnp.int32)

    @functools.partial(jax.jit, donate_argnums=(2,))
    def decode(state, token, cache):
        def step(carry, _):
            token, cache = carry
            model = nnx.merge(graphdef, state)
            logits, cache = model.forward_cached(token[:, None], ones, cache, last_only=True)
            return (jnp.argmax(logits, -1).astype(jnp.int32), cache), None

        return jax.lax.scan(step, (token, cache), None, length=steps)[0]

    prefill = jax.jit(
        lambda state, ids, cache: nnx.merge(graphdef, state).forward_cached(
            ids, jnp.full((batch,), live, jnp.int32), cache, last_only=True
        ),
        donate_argnums=(2,),
    )
    rng = np.random.default_rng(1)
    ids = jnp.asarray(rng.integers(0, model.config.vocab_size, (batch, live), dtype=np.int32))
    times = []
    for length in lengths:
        logits, cache = prefill(state, ids, init_cache(model.config, batch, length))
        token = jnp.argmax(logits, -1).astype(jnp.int32)
        best = float("inf")
        for _ in range(repeats + 1):  # the first call compiles
            cache = cache.replace(lengths=jnp.full((batch,), live, jnp.int32))  # back to `live` tokens
            start = time.perf_counter()
            token, cache = jax.block_until_ready(decode(state, token, cache))
            best = min(best, time.perf_counter() - start)
        times.append(best / steps)
    print(f"\ndecode step, batch {batch}, {live} live tokens per row, by allocated cache length")
    print(f"| {'allocated':>9} | {'ms / step':>9} | {'vs ' + str(lengths[0]):>8} |")
    print(f"|{'-' * 11}|{'-' * 11}|{'-' * 10}|")
    for length, seconds in zip(lengths, times):
        print(f"| {length:>9} | {seconds * 1e3:>9.1f} | {seconds / times[0]:>7.2f}x |")


if __name__ == "__main__":
    main()
