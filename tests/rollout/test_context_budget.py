"""The context budget (rollout/context.py) on the real engine, sandbox and a tiny random Qwen3:
segments and what folds, the chat template of a folded context, log-probs per segment, prefix
reuse across a fold, the stop when nothing more can fold, and one advantage per episode."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rollout_fixtures import (  # noqa: F401
    ANSWER,
    MEMORY,
    engine_config,
    folded_conversations,
    forced_episode,
    rollout_setup,
)

BUDGET, KEEP = 800, 1
SEARCHES = [
    '<think>\nlook\n</think>\n\n<tool_call>\n{"name": "AttractionSearch", "arguments": '
    f'{{"city": "{city}", "n": {n}}}}}\n</tool_call><|im_end|>'
    for city, n in (("Chengdu", 1), ("Beijing", 1), ("Shanghai", 1), ("Chengdu", 2))  # distinct replies
]
# searches (replies of ~200 tokens) and two memory turns whose ends the model samples
SCRIPT = {0: SEARCHES[0], 1: MEMORY, 2: SEARCHES[1], 3: SEARCHES[2], 4: MEMORY, 5: SEARCHES[3], 6: ANSWER}


def _config(**overrides):
    base = dict(context_budget=BUDGET, context_keep_turns=KEEP, max_prompt_tokens=100, max_turns=8)
    return engine_config(**{**base, **overrides})


def _run(setup, n=2, events=None, **overrides):
    from rollout import RolloutEngine

    episodes = [forced_episode(setup, f"ep{i}", f"Plan trip {i} to Chengdu.", SCRIPT) for i in range(n)]
    engine = RolloutEngine(setup.model, setup.tokenizer, _config(**overrides))
    if events is not None:
        engine.trace = lambda key, kind, ids, pos: events.append((key[0], kind, list(ids)))
    return episodes, engine.run(episodes, rng=3), engine.stats


def _by_episode(records):
    out: dict[int, list] = {}
    for record in records:
        out.setdefault(record.episode, []).append(record)
    return list(out.values())


@pytest.fixture(scope="module")
def folded(rollout_setup):
    """Two episodes sampled at T=0.8 whose contexts fold twice each under an 800-token budget, and
    the engine's trace of what it fed and sampled: (episode, kind, ids)."""
    events: list = []
    return (*_run(rollout_setup, events=events, temperature=0.8), events)


def test_segments_of_a_folded_episode(folded):
    from sandbox.types import StopReason

    episodes, records, stats, events = folded
    for index, (episode, segments) in enumerate(zip(episodes, _by_episode(records))):
        assert [r.segment for r in segments] == list(range(len(segments))) and len(segments) >= 2
        assert [r.stop_reason for r in segments] == [StopReason.FOLDED] * (len(segments) - 1) + ["answer"]
        assert segments[-1].answer == "[]" and not any(r.truncated for r in segments)
        assert sum(len(r.turns) for r in segments) == len(episode.steps) == len(SCRIPT)
        for r in segments:
            assert len(r.ids) <= BUDGET
            # only tokens sampled in this segment are trained on: its prompt (the folded context,
            # earlier turns included) is all mask 0
            assert not any(r.loss_mask[: r.prompt_len])
            assert len(r.ids) == len(r.loss_mask) == len(r.logprobs)
        assert sum(r.num_sampled for r in segments[1:]) > 0  # sampled after a fold
        # each token the sampler drew is trained on exactly once, in the segment it was drawn in
        drawn = [t for e, kind, ids in events if e == index and kind == "decode" for t in ids]
        assert [t for r in segments for t, m in zip(r.ids, r.loss_mask) if m] == drawn
    assert stats.folds == sum(r.stop_reason == StopReason.FOLDED for r in records)


def test_folded_context_is_the_template_of_the_folded_messages(folded, rollout_setup):
    """Each segment's text is Qwen3's template on the episode's messages so far, with each folded
    tool reply's content replaced by its stub; only tool replies older than the kept turns fold,
    memory replies never, and every turn keeps its exact sampled text."""
    from models.chat import render

    tok = rollout_setup.tokenizer
    episodes, records, _, _ = folded
    for episode, segments in zip(episodes, _by_episode(records)):
        for record, messages in folded_conversations(episode.messages, episode.steps, segments, tok, KEEP):
            assert tok.decode(record.ids) + "\n" == render(messages)


def test_each_segment_logprobs_equal_transformers_on_its_own_ids(folded, rollout_setup):
    """A segment's sampled tokens carry the log-probs transformers' Qwen3 (our weights, fp32) gives
    over that segment's own ids: the KV after a fold (copied from the old row, then prefilled) is
    the folded context's."""
    import torch
    import transformers

    from models.hf import model_to_state_dict

    _, records, stats, _ = folded
    assert stats.reused_tokens > 0
    model = rollout_setup.model
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**model.config.to_hf())).eval()
    state = {k: torch.from_numpy(np.array(v)) for k, v in model_to_state_dict(model).items()}
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied embeddings
    for record in (r for r in records if r.num_sampled):
        with torch.no_grad():
            logits = hf(torch.tensor([record.ids])).logits[0, :-1].double() / 0.8
        reference = (
            torch.log_softmax(logits, -1).gather(1, torch.tensor(record.ids[1:])[:, None])[:, 0].numpy()
        )
        mask = np.asarray(record.loss_mask[1:], bool)
        assert np.max(np.abs(np.asarray(record.logprobs[1:])[mask] - reference[mask])) <= 1e-4


def test_prefix_reuse_across_a_fold_changes_no_record(rollout_setup):
    """Greedy: a segment whose head is copied from the row of the segment before it gives the same
    records as one prefilled whole."""
    _, shared, with_reuse = _run(rollout_setup)
    _, alone, without = _run(rollout_setup, prefix_reuse=False)
    assert with_reuse.folds == without.folds > 0
    assert with_reuse.reused_tokens > 0 == without.reused_tokens
    assert [r.ids for r in shared] == [r.ids for r in alone]
    for a, b in zip(shared, alone):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)


def test_a_context_that_cannot_fold_enough_ends_the_stream(rollout_setup):
    from sandbox.types import StopReason

    _, records, _ = _run(rollout_setup, n=1, context_budget=600)
    last = records[-1]
    assert last.stop_reason == StopReason.CONTEXT_BUDGET and last.truncated and last.answer is None
    assert all(len(r.ids) <= 600 for r in records)


def test_segments_share_their_episode_advantage(folded):
    """The trainer's batch of a segmented single agent: one advantage per episode, the same on each
    of its segments, and the group normalised over episodes (not over records)."""
    from b2tjax.config import GRPOConfig
    from b2tjax.grpo.update import batch_advantages
    from b2tjax.tasks.single import SingleAgent

    _, records, _, _ = folded
    episodes = _by_episode(records)
    for reward, segments in zip((1.0, 0.0), episodes):
        for r in segments:
            r.reward = reward
    batch = SingleAgent.batch(None, _Scored(records), {}, group_size=2)
    adv, structure = batch_advantages(GRPOConfig(), 2, batch)
    assert structure.count == 2 and len(adv) == len(records)
    first = len(episodes[0])
    assert np.ptp(adv[:first]) == 0 and np.ptp(adv[first:]) == 0
    # two episodes, rewards 1 and 0: +1 and -1 over the group's std, whatever their segment counts
    assert adv[0] == pytest.approx(-adv[-1]) and adv[0] > 0


class _Scored:
    def __init__(self, records):
        self.records = records


def test_a_streaming_session_returns_the_same_segments(rollout_setup):
    """A session (rollout/session.py) hands back an episode's segments as a plain run does, with
    the versions of their sampled tokens."""
    from rollout import RolloutEngine

    _, plain, _ = _run(rollout_setup)
    episodes = [
        forced_episode(rollout_setup, f"ep{i}", f"Plan trip {i} to Chengdu.", SCRIPT) for i in range(2)
    ]
    engine = RolloutEngine(rollout_setup.model, rollout_setup.tokenizer, _config())
    with engine.session(rng=3) as session:
        streamed = session.advance(session.submit(episodes))
    assert [(r.episode, r.segment, r.ids) for r in streamed] == [(r.episode, r.segment, r.ids) for r in plain]
    assert all(len(r.versions) == len(r.ids) for r in streamed)
    assert all(v == 0 for r in streamed for v, m in zip(r.versions, r.loss_mask) if m)
