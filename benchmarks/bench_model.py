"""Prefill and greedy-decode throughput: our jitted Qwen3 vs transformers (torch, same weights,
same machine, same run). Prints a table with the ratio ours / transformers.

    python benchmarks/bench_model.py [--config tiny] [--batch 4] [--prompt 256] [--new 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
import transformers
from flax import nnx

from models.config import get_config
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tiny", help="preset name (models.config.PRESETS)")
    parser.add_argument("--layers", type=int, default=None, help="override num_hidden_layers")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=256, help="prefill length")
    parser.add_argument("--new", type=int, default=64, help="greedy tokens generated per row")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    cfg = get_config(args.config)
    if args.layers:
        cfg = dataclasses.replace(cfg, num_hidden_layers=args.layers)
    torch.manual_seed(0)
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**cfg.to_hf())).eval()
    ours = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    state_dict_to_model(ours, hf.state_dict())

    b, p, n = args.batch, args.prompt, args.new
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
            hf.generate(ids_t, max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None,
                        pad_token_id=0)

    start = time.perf_counter()
    ours_generate()
    compile_s = time.perf_counter() - start
    prefill_s = [best_time(fn, args.repeats) for fn in (ours_prefill, hf_prefill)]  # [ours, transformers]
    generate_s = [best_time(fn, args.repeats) for fn in (ours_generate, hf_generate)]
    decode_s = [max(gen - pre, 1e-9) for gen, pre in zip(generate_s, prefill_s)]  # decode alone
    rows = [(phase, tokens / seconds[0], tokens / seconds[1])
            for phase, tokens, seconds in (("prefill", b * p, prefill_s), ("prefill+decode", b * n, generate_s),
                                           ("decode only", b * n, decode_s))]

    print(f"\nQwen3 '{args.config}' ({cfg.num_params() / 1e6:.2f}M params, {cfg.num_hidden_layers} layers), "
          f"batch {b}, prompt {p}, {n} new tokens, fp32, {jax.devices()[0].platform}, "
          f"torch threads {torch.get_num_threads()}; our generate compile {compile_s:.1f}s")
    print(f"| {'phase':<15} | {'ours tok/s':>12} | {'transformers tok/s':>18} | {'ratio':>6} |")
    print(f"|{'-' * 17}|{'-' * 14}|{'-' * 20}|{'-' * 8}|")
    for phase, ours_tps, hf_tps in rows:
        print(f"| {phase:<15} | {ours_tps:>12.0f} | {hf_tps:>18.0f} | {ours_tps / hf_tps:>5.2f}x |")


if __name__ == "__main__":
    main()
