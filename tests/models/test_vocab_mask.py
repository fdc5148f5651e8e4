"""Padded embedding rows (Qwen3: 151,936 rows for 151,669 tokens) are never sampled and are outside
the trainer's log-softmax exactly as the sampler's: at real vocabulary size, the engine's recorded
log-probs equal the trainer's within 1e-3 and a float64 NumPy softmax over the real ids."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rollout.sampling import sample_tokens

pytestmark = pytest.mark.slow  # runs the engine and trainer at the real vocabulary size

ROWS, TOKENS = 151_936, 151_669  # Qwen3's embedding rows and tokenizer ids


def _log_softmax64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_padded_ids_are_never_sampled_even_when_most_likely():
    n = 16
    logits = np.random.default_rng(0).normal(size=(n, ROWS)).astype(np.float32)
    logits[:, TOKENS:] += 12.0  # unmasked, the padded ids would take almost all the mass
    keys = jax.random.split(jax.random.key(0), n)
    unmasked, _ = sample_tokens(jnp.asarray(logits), keys, jnp.ones(n), jnp.ones(n), jnp.zeros(n, jnp.int32))
    assert (np.asarray(unmasked) >= TOKENS).mean() > 0.9
    for temperature, top_p in ((0.0, 1.0), (1.0, 1.0), (0.7, 0.9)):
        ids, lps = sample_tokens(
            jnp.asarray(logits),
            keys,
            jnp.full(n, temperature),
            jnp.full(n, top_p),
            jnp.zeros(n, jnp.int32),
            valid_vocab=TOKENS,
        )
        ids = np.asarray(ids)
        assert ids.max() < TOKENS
        t = temperature if temperature > 0 else 1.0
        expected = _log_softmax64(logits[:, :TOKENS] / t)[np.arange(n), ids]
        np.testing.assert_allclose(np.asarray(lps), expected, atol=1e-4)
        if temperature == 0.0:
            np.testing.assert_array_equal(ids, logits[:, :TOKENS].argmax(-1))


class _OneTurn:
    """A prompt, one sampled assistant turn, then stop."""

    def __init__(self, name: str, prompt: list[int]):
        self.instance_id, self.prompt = name, prompt

    def start(self):
        from rollout.episodes import Continue

        return [Continue("main", self.prompt)]

    def on_turn_end(self, stream, text, eos):
        from rollout.episodes import Stop, TurnOutcome
        from sandbox.types import StopReason

        return TurnOutcome([Stop(stream, StopReason.DONE)])

    def on_limit(self, stream, reason):
        return []


def test_engine_and_trainer_logprobs_agree_at_real_vocabulary_size():
    from b2tjax.step.logprobs import sequence_logprobs
    from models.chat import render
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from models.tokenizer import load_tokenizer
    from rollout import RolloutConfig, RolloutEngine

    tok = load_tokenizer("qwen3")
    assert tok.vocab_size == TOKENS
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=ROWS, initializer_range=0.1)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    # The padded rows (tied embedding = output head) are 30x copies of real rows: unmasked, they
    # would hold most of the probability mass.
    emb = model.embed.embedding[...]
    model.embed.embedding[...] = emb.at[TOKENS:].set(30.0 * emb[: ROWS - TOKENS])
    engine = RolloutEngine(
        model,
        tok,
        RolloutConfig(
            batch_rows=2,
            max_turns=1,
            max_turn_tokens=24,
            max_seq_len=256,
            temperature=1.0,
            prefill_chunk=64,
        ),
    )
    messages = [{"role": "user", "content": "Plan a trip to Chengdu."}]
    prompt = tok.encode(render(messages, add_generation_prompt=True))
    records = engine.run([_OneTurn("a", prompt), _OneTurn("b", prompt)], rng=0)

    logprobs = jax.jit(
        lambda ids, valid: sequence_logprobs(model, ids, valid_vocab=valid)[0], static_argnums=1
    )
    full_logits = jax.jit(lambda ids: model(ids))
    for record in records:
        mask = np.asarray(record.loss_mask, bool)
        assert mask.sum() >= 10 and max(record.ids) < TOKENS
        ids = jnp.asarray([record.ids], jnp.int32)
        sampler = np.asarray(record.logprobs)[mask]
        trainer = np.asarray(logprobs(ids, TOKENS))[0][mask]
        assert np.abs(sampler - trainer).max() <= 1e-3
        logits = np.asarray(full_logits(ids))[0, :-1, :TOKENS]
        exact = _log_softmax64(logits)[np.arange(len(record.ids) - 1), record.ids[1:]]
        np.testing.assert_allclose(trainer, exact[mask[1:]], atol=1e-4)
        # without the mask the trainer would disagree: the padded rows carry real probability
        assert np.abs(np.asarray(logprobs(ids, None))[0][mask] - sampler).min() > 1.0
