"""The LoRA sampler's two options, measured: decode with the adapters applied in every step (what
rollout/placement.py does: the sampler shares the frozen base and holds the adapters) against
decode with the adapters merged into a copy of the weights, which also costs a merge (W + s A B
for every target) after every update and a second copy of the base.

    python benchmarks/bench_lora_sampler.py [--config qwen3-0.6b] [--layers 4] [--rank 16]
                                            [--batch 8] [--live 512] [--steps 32]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from flax import nnx

from models import lora
from models.config import get_config
from models.kv_cache import init_cache
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime


def best_time(fn, repeats: int = 3) -> float:
    """Fastest of `repeats` timed calls after a warm-up (compiling) call."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times)


def decode_time(model: nnx.Module, batch: int, live: int, steps: int) -> float:
    """Seconds per decode step of `steps` one-token steps over caches holding `live` tokens."""
    graphdef, state = nnx.split(model)
    cache = init_cache(model.config, batch, live + steps + 1, model.dtype)
    prompt = jnp.ones((batch, live), jnp.int32)

    @jax.jit
    def prefill(state, cache):
        return nnx.merge(graphdef, state).forward_cached(prompt, jnp.full((batch,), live), cache)[1]

    @jax.jit
    def decode(state, cache):
        def body(i, cache):
            logits, cache = nnx.merge(graphdef, state).forward_cached(
                jnp.ones((batch, 1), jnp.int32), jnp.ones((batch,), jnp.int32), cache
            )
            return cache

        return jax.lax.fori_loop(0, steps, body, cache)

    filled = prefill(state, cache)
    return best_time(lambda: decode(state, filled)) / steps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="qwen3-0.6b")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--live", type=int, default=512)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    dtype = jnp.dtype(args.dtype)
    cfg = get_config(args.config, num_hidden_layers=args.layers)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=dtype, param_dtype=dtype))
    lora.add_lora(model, lora.LoraConfig(rank=args.rank))
    applied = decode_time(model, args.batch, args.live, args.steps)
    graphdef, state = nnx.split(model)
    merge = jax.jit(lambda s: nnx.state(lora.merge_lora(nnx.merge(graphdef, s))))
    merge_s = best_time(lambda: merge(state))
    merged = decode_time(lora.merge_lora(nnx.clone(model)), args.batch, args.live, args.steps)
    adapters = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.LoRAParam)))
    print(
        f"{args.config} x {args.layers} layers, rank {args.rank}, {args.dtype}, {jax.default_backend()}: "
        f"{adapters / 1e6:.2f}M adapter params\n"
        f"| sampler | decode step (ms), batch {args.batch}, {args.live} live tokens "
        "| per-update cost (ms) |\n"
        f"|---|---|---|\n"
        f"| adapters applied | {applied * 1e3:.2f} | 0 (adapters cast: {adapters * 2 / 1e6:.1f} MB) |\n"
        f"| adapters merged | {merged * 1e3:.2f} | {merge_s * 1e3:.1f} (merge every target) |"
    )


if __name__ == "__main__":
    main()
