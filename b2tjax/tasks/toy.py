"""The digit task: a reward cheap enough to check on CPU that GRPO really learns.

Vocabulary: 0 pad, 1 BOS, then `num_digits` *name* tokens ("zero".."nine") and `num_digits`
*digit* tokens ("0".."9"), the rest filler. Prompt [BOS, name(k)]; the policy answers with
`answer_len` tokens and earns reward 1 iff the first one is digit(k). A random model scores about
1 / vocab_size; a trained one scores 1. Episodes are sampled with the rollout package's
`sample_tokens` (same temperature / log-prob convention as the real engine).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from b2tjax.config import ToyConfig
from b2tjax.grpo.update import RolloutBatch
from b2tjax.tasks.base import ProcessPart
from rollout.record import EpisodeRecord
from rollout.sampling import sample_tokens
from sandbox.types import StopReason

BOS = 1


def name_token(k: int) -> int:
    return 2 + k


def digit_token(k: int, num_digits: int) -> int:
    return 2 + num_digits + k


@functools.partial(jax.jit, static_argnums=(0, 4))
def _sample(graphdef, state, prompts: jax.Array, key: jax.Array, answer_len: int, temperature: jax.Array):
    """prompts int32 [N, P] -> (answer ids [N, L], log-probs [N, L]) by full re-forward per token."""
    model = nnx.merge(graphdef, state)
    n = prompts.shape[0]
    ids, lps = prompts, []
    for i in range(answer_len):
        logits = model(ids)[:, -1]  # [N, V] fp32
        keys = jax.random.split(jax.random.fold_in(key, i), n)
        tok, lp = sample_tokens(
            logits, keys, jnp.full((n,), temperature), jnp.ones((n,)), jnp.zeros((n,), jnp.int32)
        )
        ids = jnp.concatenate([ids, tok[:, None]], axis=1)
        lps.append(lp)
    return ids[:, prompts.shape[1] :], jnp.stack(lps, axis=1)


class DigitTask:
    """Implements the trainer's Task protocol for the digit task."""

    def __init__(self, cfg: ToyConfig, temperature: float = 1.0):
        if cfg.vocab_size < 2 + 2 * cfg.num_digits:
            raise ValueError(
                f"toy.vocab_size must be >= {2 + 2 * cfg.num_digits} for {cfg.num_digits} digits"
            )
        self.cfg = cfg
        self.temperature = temperature

    def train_examples(self) -> Sequence[Any]:
        return list(range(self.cfg.num_digits))

    def sft_examples(self) -> None:
        return None

    def sample(
        self, model: nnx.Module, digits: Sequence[int], seed: int, temperature: float
    ) -> tuple[np.ndarray, np.ndarray]:
        prompts = jnp.asarray([[BOS, name_token(k)] for k in digits], jnp.int32)
        graphdef, state = nnx.split(model)
        answers, lps = _sample(
            graphdef, state, prompts, jax.random.key(seed), self.cfg.answer_len, jnp.float32(temperature)
        )
        return np.asarray(answers), np.asarray(lps)

    def rollout(
        self, model: nnx.Module, prompts: list[int], group_size: int, seed: int, should_stop: Any = None
    ) -> ProcessPart[RolloutBatch]:
        """One jitted sampling call over the global batch: nothing to interrupt (`should_stop` is not
        polled), nothing to pool."""
        digits = [k for k in prompts for _ in range(group_size)]
        answers, lps = self.sample(model, digits, seed, self.temperature)
        records = []
        for k, answer, lp in zip(digits, answers, lps):
            rec = EpisodeRecord(instance_id=f"digit-{k}", prompt_len=2, stop_reason=StopReason.ANSWER)
            rec.append([BOS, name_token(k)], sampled=False)
            rec.append(answer.tolist(), sampled=True, logprobs=lp.tolist())
            rec.reward = float(answer[0] == digit_token(k, self.cfg.num_digits))
            records.append(rec)
        return ProcessPart.alone(
            RolloutBatch(records, {"accuracy": float(np.mean([r.reward for r in records]))})
        )

    def evaluate(self, model: nnx.Module) -> ProcessPart[tuple[dict, str]]:
        digits = list(range(self.cfg.num_digits))
        answers, _ = self.sample(model, digits, 0, temperature=0.0)  # greedy
        correct = [int(a[0] == digit_token(k, self.cfg.num_digits)) for k, a in zip(digits, answers)]
        acc = float(np.mean(correct))
        return ProcessPart.alone(
            ({"greedy_accuracy": acc}, f"digit task: greedy accuracy {acc:.2f} over {len(digits)} prompts")
        )

    def eval_episodes(self) -> None:
        """No HTML report: the toy task's episodes are not a benchmark's."""
        return None
