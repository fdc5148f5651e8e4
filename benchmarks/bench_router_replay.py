"""Router replay in bf16: do sampler and trainer route tokens alike, and how far apart are their log-probs?

The RolloutEngine samples records with a small random Qwen3-MoE in bf16 (the sampler's weights
and KV cache in bf16; `router_replay: replay`, so each record keeps the experts the sampler chose
for every token it computed). The trainer recomputes the records teacher-forced in one forward, in
bf16, as the GRPO update does (`b2tjax.step.logprobs.position_logprobs` with the packed rows'
segment ids, positions and routes): without the routes (replay off: its own top-k) and with them
(replay on). Reported per case: the share of tokens whose experts differ from the sampler's in at
least one layer (and the share of (token, layer) choices), and the mean and max |sampler -
trainer| log-prob over sampled tokens; beside them a dense Qwen3 of the same width (hidden size,
layers, attention; its MLP as wide as the k active experts) sampled and recomputed the same way.
The records' tokens differ between the models (each samples its own), not their number.

    python benchmarks/bench_router_replay.py [--episodes 16] [--tokens 64] [--seed 0]
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np
from bench_logprob_gap import one_turn_records  # benchmarks/ is the script directory, first on sys.path
from flax import nnx

from b2tjax.step.batch import loss_positions
from b2tjax.step.logprobs import position_logprobs
from models.config import get_config
from models.moe_config import MoeConfig
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from rollout.buckets import pow2_bucket

MOE = MoeConfig(num_experts=16, num_experts_per_tok=4, moe_intermediate_size=32, norm_topk_prob=True)


def policy(moe: bool, seed: int) -> Qwen3ForCausalLM:
    """4 layers, hidden 64, bf16 compute; the MoE's 16 experts top-4, the dense MLP 4 x 32 wide."""
    cfg = get_config(
        "tiny", vocab_size=2048, num_hidden_layers=4, initializer_range=0.1,
        intermediate_size=MOE.num_experts_per_tok * MOE.moe_intermediate_size, moe=MOE if moe else None,
    )  # fmt: skip
    return Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(seed), runtime=ModelRuntime(dtype=jnp.bfloat16))


def sample(model, episodes: int, tokens: int, seed: int) -> tuple[list, int]:
    """Records of one sampled turn each (T = 1), the routes kept for a MoE; the tokenizer's size."""
    replay = "replay" if model.config.moe else "off"
    records, tok = one_turn_records(model, episodes, tokens, seed, router_replay=replay)
    return records, tok.vocab_size


def recompute(model, record, replay: bool, vocab: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The trainer's log-probs of the record's sampled tokens and, for a MoE, the experts its
    forward used for each token the sampler computed ([n, L_moe, k])."""
    width = pow2_bucket(len(record.ids))
    ids = np.zeros((1, width), np.int32)
    ids[0, : len(record.ids)] = record.ids
    segment = (np.arange(width) < len(record.ids)).astype(np.int32)[None]
    positions = np.arange(width, dtype=np.int32)[None]
    routes = None
    if replay:
        routes = np.full((1, width, *record.routes.shape[1:]), -1, np.int16)
        routes[0, : len(record.routes)] = record.routes
    sampled = np.zeros(ids.shape, np.float32)
    sampled[0, : len(record.ids)] = record.loss_mask
    where = loss_positions(sampled)
    args = [jnp.asarray(a) for a in (ids, where, segment, positions)]
    lp, chosen = _trainer(model, *args, None if routes is None else jnp.asarray(routes), vocab)
    picked = where[0, : int(sampled.sum())]
    got = np.abs(np.asarray(record.logprobs, np.float32)[picked] - np.asarray(lp)[0, : picked.size])
    return got, None if chosen is None else np.asarray(chosen)[0, : len(record.routes)]


@nnx.jit(static_argnums=(6,))
def _trainer(model, ids, where, segment, positions, routes, vocab):
    segments = (segment, positions, routes)
    lp = position_logprobs(model, ids, where, temperature=1.0, valid_vocab=vocab, segments=segments)[0]
    if model.config.moe is None:
        return lp, None
    return lp, model.routed_forward(ids, positions, segment, routes)[1][1]


def measure(model, records, replay: bool, vocab: int) -> dict:
    """Shares of tokens (any layer) and of (token, layer) choices routed otherwise than the sampler
    did, and the mean / max log-prob gap over sampled tokens."""
    gaps, tokens, choices = [], [], []
    for record in records:
        gap, chosen = recompute(model, record, replay, vocab)
        gaps.append(gap)
        if chosen is not None:
            differ = (np.sort(chosen, -1) != np.sort(record.routes, -1)).any(-1)  # [n, L_moe]
            tokens.append(differ.any(-1))
            choices.append(differ.reshape(-1))
    every = np.concatenate(gaps)
    share = lambda parts: float(np.concatenate(parts).mean()) if parts else float("nan")  # noqa: E731
    return {
        "tokens": sum(len(r.routes) if r.routes is not None else len(r.ids) for r in records),
        "sampled": every.size,
        "token_share": share(tokens),
        "choice_share": share(choices),
        "mean": float(every.mean()),
        "max": float(every.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64, help="sampled tokens per episode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    moe, dense = policy(True, args.seed), policy(False, args.seed)
    moe_records, vocab = sample(moe, args.episodes, args.tokens, args.seed)
    dense_records, _ = sample(dense, args.episodes, args.tokens, args.seed)
    rows = [
        ("MoE, replay off", measure(moe, moe_records, False, vocab)),
        ("MoE, replay on", measure(moe, moe_records, True, vocab)),
        ("dense, same width", measure(dense, dense_records, False, vocab)),
    ]
    reference = rows[2][1]["mean"]
    print(
        "| bf16 policy | tokens (sampled) | tokens routed otherwise | (token, layer) choices otherwise "
        "| mean abs log-prob gap | max abs gap | mean gap / dense |\n|---|---|---|---|---|---|---|"
    )
    for name, m in rows:
        routed = "-" if np.isnan(m["token_share"]) else f"{m['token_share']:.2%}"
        choice = "-" if np.isnan(m["choice_share"]) else f"{m['choice_share']:.2%}"
        print(
            f"| {name} | {m['tokens']} ({m['sampled']}) | {routed} | {choice} | {m['mean']:.2e} "
            f"| {m['max']:.2e} | {m['mean'] / reference:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
