"""Sampler vs trainer log-probs on the same records: the gap GRPO's importance ratio sees at ratio 1.

The RolloutEngine samples records (T = 1, prefix reuse on, a group of episodes on one prompt); the
trainer recomputes every sampled token's log-prob from the record's ids in one teacher-forced pass,
as `b2tjax.grpo.update` does (`b2tjax.step.logprobs.position_logprobs` at the record's
`train_batch.loss_positions`: the output head only where the sampler recorded a log-prob).
Reported: mean and max |sampler - trainer| over sampled tokens, in fp32 and with bf16 compute
(the sampler's weights and KV cache in bf16, as in a bf16 run). Random tiny Qwen3 (2 layers,
hidden 64), the lookup task's word tokenizer (its model vocabulary padded to 2,048 rows, which
neither side ever samples or counts).

    python benchmarks/bench_logprob_gap.py [--episodes 16] [--tokens 64]
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx

from b2tjax.step.batch import loss_positions
from b2tjax.step.logprobs import position_logprobs
from b2tjax.tasks.toy_tools import lookup_tokenizer, prompt_ids
from models.config import get_config
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from rollout import Continue, Episode, RolloutConfig, RolloutEngine, Stop, TurnOutcome
from rollout.buckets import pow2_bucket


class OneTurn(Episode):
    """One sampled turn on a fixed prompt, then stop."""

    def __init__(self, index: int, prompt: list[int]):
        self.instance_id, self.prompt = f"gap-{index}", prompt

    def start(self) -> list[Continue]:
        return [Continue("main", self.prompt)]

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        return TurnOutcome([Stop(stream, "done", text)])


def one_turn_records(model, episodes: int, tokens: int, seed: int = 0, **overrides) -> tuple[list, Any]:
    """Records of one sampled turn (T = 1, up to `tokens`) on the lookup task's two prompts, and the
    tokenizer: what the sampler-vs-trainer gap is measured on (benchmarks/bench_router_replay.py too)."""
    tok = lookup_tokenizer(4, 4)
    config = RolloutConfig(
        batch_rows=8,
        max_turns=1,
        max_turn_tokens=tokens,
        max_seq_len=256,
        temperature=1.0,
        prefill_min_bucket=16,
        **overrides,
    )
    one_turns = [OneTurn(i, prompt_ids(tok, i % 2)) for i in range(episodes)]
    return RolloutEngine(model, tok, config).run(one_turns, rng=seed), tok


def gap(dtype: str, episodes: int, tokens: int) -> tuple[float, float, int]:
    """(mean, max) |sampler - trainer| over sampled tokens, and their count."""
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=2048, initializer_range=0.1)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.dtype(dtype)))
    records, tok = one_turn_records(model, episodes, tokens)
    diffs = []
    for record in records:
        ids = np.zeros((1, pow2_bucket(len(record.ids))), np.int32)
        ids[0, : len(record.ids)] = record.ids
        sampled = np.zeros(ids.shape, np.float32)
        sampled[0, : len(record.ids)] = record.loss_mask
        positions = loss_positions(sampled)
        trainer, _ = position_logprobs(
            model, jnp.asarray(ids), jnp.asarray(positions), temperature=1.0, valid_vocab=tok.vocab_size
        )
        picked = positions[0, : int(sampled.sum())]
        diffs.append(np.abs(np.asarray(record.logprobs)[picked] - np.asarray(trainer)[0, : picked.size]))
    every = np.concatenate(diffs)
    return float(every.mean()), float(every.max()), every.size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64, help="sampled tokens per episode")
    args = parser.parse_args()
    print("| compute dtype | sampled tokens | mean abs gap | max abs gap |\n|---|---|---|---|")
    for dtype in ("float32", "bfloat16"):
        mean, worst, count = gap(dtype, args.episodes, args.tokens)
        print(f"| {dtype} | {count} | {mean:.2e} | {worst:.2e} |", flush=True)


if __name__ == "__main__":
    main()
