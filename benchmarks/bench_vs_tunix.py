"""Speed benchmark: greedy decoding side by side with Tunix's sampler (`google-tunix`), same jax, same
shapes, same run.

Tunix is an optional peer, not a dependency: install it to compare (`pip install google-tunix`);
without it this prints a message and exits 0. Shapes follow issue 14: Qwen3-0.6B width, 2 layers,
fp32, batch 4, a 128-token prompt, 64 greedy tokens, caches of 256 and 4,096 slots. Random weights
(decoding speed does not depend on them). Per-token decode time is measured the same way on both
sides, through each one's public generation path: (time for 64 tokens - time for 1 token) / 63,
best of --repeats, so prefill and host overheads cancel.

    python benchmarks/bench_vs_tunix.py [--slots 256 4096] [--batch 4] [--prompt 128] [--new 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from bench_model import best_time  # benchmarks/ is the script directory, first on sys.path
from flax import nnx

from models.config import get_config
from models.greedy import greedy_generate
from models.kv_cache import init_cache
from models.qwen3 import Qwen3ForCausalLM
from rollout.programs import ModelRunner
from rollout.sampling import SamplingArrays


def per_token(run: Callable[[int], object], new: int, repeats: int) -> float:
    """Seconds per decoded token: (time(new) - time(1)) / (new - 1)."""
    return max(best_time(lambda: run(new), repeats) - best_time(lambda: run(1), repeats), 0.0) / (new - 1)


class _IdTokenizer:
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
        logits, cache = runner.prefill(
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


def tunix_runner(cfg, prompt: np.ndarray, slots: int) -> Callable[[int], object]:
    from tunix.generate import sampler as tunix_sampler
    from tunix.models.qwen3 import model as tunix_qwen3

    tcfg = tunix_qwen3.ModelConfig(
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
    )
    model = tunix_qwen3.Qwen3(tcfg, rngs=nnx.Rngs(0))
    cache = tunix_sampler.CacheConfig(
        cache_size=slots,
        num_layers=cfg.num_hidden_layers,
        num_kv_heads=cfg.num_key_value_heads,
        head_dim=cfg.head_dim,
    )
    sampler = tunix_sampler.Sampler(model, _IdTokenizer(), cache)
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
        f"{args.new} greedy tokens, {jax.devices()[0].platform}; decode ms per token (lower is better)"
    )
    print(
        f"| {'slots':>6} | {'Tunix':>7} | {'RolloutEngine':>13} | {'vs Tunix':>8} | {'greedy_generate':>15} "
        f"| {'vs Tunix':>8} |"
    )
    print(f"|{'-' * 8}|{'-' * 9}|{'-' * 15}|{'-' * 10}|{'-' * 17}|{'-' * 10}|")
    for slots in args.slots:
        tunix_s = per_token(tunix_runner(cfg, prompt, slots), args.new, args.repeats)
        engine_s = per_token(engine_runner(model, prompt, slots), args.new, args.repeats)
        greedy_s = per_token(greedy_runner(model, prompt, slots), args.new, args.repeats)
        print(
            f"| {slots:>6} | {tunix_s * 1e3:>7.1f} | {engine_s * 1e3:>13.1f} | {tunix_s / engine_s:>7.2f}x "
            f"| {greedy_s * 1e3:>15.1f} | {tunix_s / greedy_s:>7.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
