"""Our Qwen3 with RoPE scaling (linear, YaRN) against transformers' Qwen3ForCausalLM, fp32, the same
random weights: max |logit difference| far beyond the original window, uncached (training) and on
the KV cache (a prefill, then the rest appended as rollout's prefix reuse does), and greedy
decoding on the cache against transformers' argmax at every position. The same weights with plain
RoPE show what the scaling changes. Not a speed benchmark: the parity table of docs/results/speed.md
"RoPE scaling parity".

    python benchmarks/rope_parity.py [--window 64] [--length 512]
"""

from __future__ import annotations

import argparse
import dataclasses

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
from models.rope import RopeScaling

forward = nnx.jit(lambda m, x: m(x))
cached = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c))


def pair(cfg: Qwen3Config, seed: int = 0) -> tuple[transformers.Qwen3ForCausalLM, Qwen3ForCausalLM]:
    """A random transformers model (wider init and random norm scales, so logits spread) and ours
    with its weights."""
    torch.manual_seed(seed)
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**cfg.to_hf())).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    ours = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(seed))
    state_dict_to_model(ours, hf.state_dict())
    return hf, ours


def hf_logits(hf, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(torch.from_numpy(ids).long()).logits.numpy()


def row(name: str, scaling: RopeScaling, length: int) -> list[str]:
    window = scaling.original_max_position_embeddings or length // int(scaling.factor)
    positions = round(scaling.factor * window)  # as a recipe sets it (transformers warns otherwise)
    cfg = dataclasses.replace(
        get_config(name), initializer_range=0.1, rope_scaling=scaling, max_position_embeddings=positions
    )
    hf, ours = pair(cfg)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, length), dtype=np.int32)
    expected = hf_logits(hf, ids)
    uncached = np.abs(np.asarray(forward(ours, jnp.asarray(ids))) - expected).max()
    half = length // 2
    full = jnp.asarray([half, half], jnp.int32)
    _, cache = cached(ours, jnp.asarray(ids[:, :half]), full, init_cache(cfg, 2, length))
    rest, _ = cached(ours, jnp.asarray(ids[:, half:]), jnp.asarray([length - half] * 2, jnp.int32), cache)
    on_cache = np.abs(np.asarray(rest) - expected[:, half:]).max()
    prompt = ids[:, : length // 8]
    new = length - prompt.shape[1]
    tokens = np.asarray(greedy_generate(ours, jnp.asarray(prompt), jnp.asarray([prompt.shape[1]] * 2), new))
    seq = np.concatenate([prompt, tokens], axis=1)
    argmax = hf_logits(hf, seq)[:, prompt.shape[1] - 1 : -1].argmax(-1)
    plain = Qwen3ForCausalLM(dataclasses.replace(cfg, rope_scaling=RopeScaling()), rngs=nnx.Rngs(0))
    nnx.update(plain, nnx.state(ours, nnx.Param))
    plain_diff = np.abs(np.asarray(forward(plain, jnp.asarray(ids))) - expected).max()
    return [
        f"{scaling.kind} x{scaling.factor:g}",
        name,
        f"{length} ({length / window:g}x window {window})",
        f"{uncached:.1e}",
        f"{on_cache:.1e}",
        f"{int((argmax == tokens).sum())} / {tokens.size}",
        f"{plain_diff:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=64, help="the original (pretrained) window")
    parser.add_argument("--length", type=int, default=512, help="positions per sequence")
    args = parser.parse_args()
    w = args.window
    scalings = [
        RopeScaling("yarn", 4.0, w),
        RopeScaling("yarn", 8.0, w, beta_fast=16, beta_slow=2, truncate=False),
        RopeScaling("linear", 4.0),
    ]
    head = ["scaling", "model", "positions", "uncached", "KV cache", "greedy = HF argmax", "plain RoPE"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for scaling in scalings:
        for name in ("tiny", "tiny-untied"):
            print("| " + " | ".join(row(name, scaling, args.length)) + " |", flush=True)


if __name__ == "__main__":
    main()
