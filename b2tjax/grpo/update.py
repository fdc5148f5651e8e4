"""One GRPO update from a step's scored records: credit, fixed-shape rows, old/reference log-probs,
then epochs x mini-batches of optimizer steps.

The records may be any number of streams of the step's episodes (`RolloutBatch.groups` /
`episodes`); b2tjax/grpo/credit.py turns their rewards into advantages and b2tjax/grpo/layout.py pads
them to the shapes the jitted steps were compiled for.

`b2tjax.grpo.credit` turns the rewards into advantages (`grpo.credit`: `team` | `team_local`,
docs/concepts/himap.md "Credit assignment"); `b2tjax.grpo.layout.RowLayout` pads each mini-batch to
`rollout_batch / mini_batches` x 2^j rows (mask-0 rows, invisible to loss, gradient and
normaliser), so the train step compiles a few times, not once per record count. `grpo_update(cfg,
fns, state, batch, seed, ref_params)` is the whole update; it logs `records`, `episodes`,
`padded_share`, `adv_mean/<role>`, `rows` (rows computed per pass over the records) and
`useful_token_share` (the records' tokens over the tokens computed). With `grpo.packing` the
records are packed into token-budget rows instead (b2tjax/grpo/packed.py), the same update.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import numpy as np

from b2tjax.config import TrainConfig
from b2tjax.grpo import credit, offpolicy
from b2tjax.grpo.layout import RowLayout, agree_on_maximum
from b2tjax.grpo.packed import packed_update
from b2tjax.step.batch import TrainBatch, loss_positions, pad_length, stack_rows, to_micro
from b2tjax.step.train_step import StepFns, TrainState
from rollout.record import EpisodeRecord


@dataclasses.dataclass
class RolloutBatch:
    """A step's scored records plus task metrics (pass rates...).

    `record.reward` is the episode's team reward, the same on every stream of an episode.
    `groups[i]` / `episodes[i]`: prompt and episode index of record i (streams of one episode share
    the episode; the G episodes of a prompt share the group). Both None: one record per episode, the
    G records of a prompt contiguous. `local_rewards[i]`: record i's own local term (a day
    executor's day score) or None; used by `grpo.credit=team_local`. `policy_version`: streaming
    (rollout.max_staleness > 0) only, the version of the weights this update starts from (the
    records' `versions` count in the same updates); the update then uses the decoupled objective
    (b2tjax/grpo/offpolicy.py). None: every record was sampled by the current weights.
    """

    records: list[EpisodeRecord]
    metrics: dict[str, float]
    groups: list[int] | None = None
    episodes: list[int] | None = None
    local_rewards: list[float | None] | None = None
    policy_version: int | None = None


def batch_advantages(cfg: TrainConfig, batch: RolloutBatch) -> tuple[np.ndarray, credit.Episodes]:
    """[N] advantages of the batch's records under `grpo.credit`, and the episode structure."""
    g = cfg.grpo
    episodes = credit.episodes_of(
        [r.reward for r in batch.records], cfg.rollout.group_size, batch.groups, batch.episodes
    )
    # a stream's role and (HiMAP executors) day ride on its record's tag
    keys = credit.local_comparison_keys(
        episodes.group[episodes.of_record],
        [getattr(r, "role", "agent") for r in batch.records],
        [r.tag.detail("day") for r in batch.records],
    )
    adv = credit.record_advantages(
        episodes,
        credit=g.credit,
        local_rewards=batch.local_rewards,
        local_keys=keys,
        local_weight=g.local_weight,
        eps=g.adv_eps,
        scale_by_std=g.scale_by_std,
    )
    return adv, episodes


def spread_groups(episodes: credit.Episodes) -> set:
    """The groups whose episode rewards differ (a flat group's advantages are all 0)."""
    return {p for p in set(episodes.group) if np.ptp(episodes.reward[episodes.group == p]) > 0}


def credit_metrics(records: list[EpisodeRecord], adv: np.ndarray, episodes: credit.Episodes) -> dict:
    """Rewards over episodes (each counted once), mean advantage per role."""
    metrics = {
        "reward": float(episodes.reward.mean()),
        "reward_std": float(episodes.reward.std()),
        "groups_all_equal": 1.0 - len(spread_groups(episodes)) / len(set(episodes.group)),
        "records": float(len(records)),
        "episodes": float(episodes.count),
    }
    roles = np.array([getattr(r, "role", "agent") for r in records])
    for role in sorted(set(roles)):
        metrics[f"adv_mean/{role}"] = float(adv[roles == role].mean())
    return metrics


def informative_records(episodes: credit.Episodes, mini_batches: int) -> np.ndarray:
    """Indices of the records to train on under `grpo.drop_flat_groups`: those of groups whose
    episode rewards differ. Topped up with flat records (advantage 0: no gradient) to at least
    `mini_batches`, and to that many on every process when any process has one (the global batch
    needs a shape everywhere); empty when no group of the step, on any process, has a spread."""
    group_of = episodes.group[episodes.of_record]  # [records]
    spread = spread_groups(episodes)
    keep = [i for i, p in enumerate(group_of) if p in spread]
    if agree_on_maximum(len(keep)) == 0:
        return np.zeros(0, np.int64)
    flat = [i for i, p in enumerate(group_of) if p not in spread]
    return np.asarray(keep + flat[: max(mini_batches - len(keep), 0)], np.int64)


def step_rows(cfg: TrainConfig, records: list[EpisodeRecord], layout: RowLayout) -> dict[str, np.ndarray]:
    """ids, sampled (the sampler's mask), sampler_lp and mask (what is trained), [rows, length]."""
    length = agree_on_maximum(pad_length(max(len(r.ids) for r in records)))
    empty: list[list] = [[] for _ in range(layout.padded)]  # padding rows: all zero
    ids = stack_rows([r.ids for r in records] + empty, length, np.int32)
    sampled = stack_rows([r.loss_mask for r in records] + empty, length, np.float32)
    sampler_lp = stack_rows([r.logprobs for r in records] + empty, length, np.float32)
    if cfg.grpo.loss_mask:
        mask = sampled.copy()
    else:  # ablation: every token after the prompt, environment replies included
        after_prompt = [[0] * r.prompt_len + [1] * (len(r.ids) - r.prompt_len) for r in records]
        mask = stack_rows(after_prompt + empty, length, np.float32)
    mask[:, 0] = 0.0
    return {"ids": ids, "sampled": sampled, "sampler_lp": sampler_lp, "mask": mask}


def grpo_update(
    cfg: TrainConfig,
    fns: StepFns,
    state: TrainState,
    batch: RolloutBatch,
    seed: int,
    ref_params=None,
    before_update: Callable[[], None] = lambda: None,
) -> tuple[TrainState, dict]:
    """Advantages, old/ref log-probs, then epochs x mini-batches optimizer steps. `before_update`
    runs last before the first step, which donates `state`: from there on the step must finish.
    `ref_params` is the frozen KL reference (needed when grpo.beta > 0)."""
    g = cfg.grpo
    records = batch.records
    adv, episodes = batch_advantages(cfg, batch)
    step_metrics = credit_metrics(records, adv, episodes)
    streamed = batch.policy_version is not None
    if streamed:  # over all the step's records, checked before any update
        step_metrics.update(
            offpolicy.staleness_metrics(records, batch.policy_version, cfg.rollout.max_staleness)
        )
    nominal = cfg.rollout_batch // g.mini_batches
    micro_rows = g.micro_batch_size or nominal
    if g.drop_flat_groups:
        kept = informative_records(episodes, g.mini_batches)
        step_metrics["trained_records"] = float(len(kept))
        if not len(kept):  # nothing to learn from this step: no forward, no optimizer step
            return state, {**step_metrics, "applied": 0.0}
        records, adv = [records[i] for i in kept], adv[kept]
        nominal = micro_rows  # mini-batches grow from one micro-batch by powers of two
    if g.packing:
        state, metrics = packed_update(
            cfg, fns, state, records, adv, seed, ref_params, before_update, streamed=streamed
        )
    else:
        layout = RowLayout.for_records(len(records), g.mini_batches, nominal, micro_rows)
        state, metrics = _padded_update(
            cfg, fns, state, records, adv, layout, seed, ref_params, before_update, streamed
        )
    return state, {**step_metrics, **metrics}


def _padded_update(
    cfg: TrainConfig,
    fns: StepFns,
    state: TrainState,
    records: list[EpisodeRecord],
    adv: np.ndarray,
    layout: RowLayout,
    seed: int,
    ref_params,
    before_update: Callable[[], None],
    streamed: bool,
) -> tuple[TrainState, dict]:
    """`grpo_update` on one record per row, padded to `layout` (packed_update's counterpart)."""
    g = cfg.grpo
    n = len(records)
    rows = step_rows(cfg, records, layout)
    logprobs_of = _logprob_pass(fns, rows, layout)
    trainer_lp = logprobs_of(state.params)
    sampled, sampler_lp = rows["sampled"], rows["sampler_lp"]
    token_count = max(float(sampled.sum()), 1.0)
    gap = np.abs(trainer_lp - sampler_lp) * sampled
    metrics = {
        "logprob_gap_mean": float(gap.sum() / token_count),
        "logprob_gap_max": float(gap.max()),
        "response_tokens": float(sampled.sum() / n),
        "padded_share": layout.padded / layout.rows,
        "rows": float(layout.rows),
        "useful_token_share": sum(len(r.ids) for r in records) / rows["ids"].size,
    }
    old, is_weights, is_metrics = offpolicy.ratio_anchor(g, streamed, trainer_lp, sampler_lp, sampled)
    metrics.update(is_metrics)
    ref_lp = logprobs_of(ref_params) if g.beta > 0 else None
    flat = TrainBatch(
        ids=rows["ids"],
        mask=rows["mask"],
        old_logprobs=old.astype(np.float32),
        advantages=np.concatenate([adv, np.zeros(layout.padded, np.float32)]),
        ref_logprobs=ref_lp,
        positions=loss_positions(rows["mask"]),
        is_weights=is_weights,
    )
    before_update()
    state, step_means = _optimize(fns, state, flat, layout, n, g.epochs, seed)
    metrics.update(step_means)
    return state, metrics


def _logprob_pass(fns: StepFns, rows: dict[str, np.ndarray], layout: RowLayout) -> Callable:
    """params -> the step's per-token log-probs [rows, length] under them (the old and reference
    passes), read where the sampler recorded one (the gap) or the loss trains."""
    length = rows["ids"].shape[1]
    micro = layout.rows // layout.micro_rows
    ids_dev = fns.shard_rows(to_micro(rows["ids"], micro))
    read = np.maximum(rows["sampled"], rows["mask"])
    read[:, 0] = 0.0
    read_dev = fns.shard_rows(to_micro(loss_positions(read), micro))
    return lambda params: fns.host_rows(fns.logprobs(params, ids_dev, read_dev)).reshape(layout.rows, length)


def _optimize(
    fns: StepFns, state: TrainState, flat: TrainBatch, layout: RowLayout, n: int, epochs: int, seed: int
) -> tuple[TrainState, dict[str, float]]:
    """`epochs` passes over the `n` records in seeded random mini-batches; the steps' mean metrics."""
    rng = np.random.default_rng(seed)
    sums: dict[str, float] = {}
    updates = 0
    for _ in range(epochs):
        for mini_rows in layout.mini_batch_rows(rng.permutation(n)):
            micro = flat.take(mini_rows).split(layout.micro_per_mini)
            state, step_metrics = fns.grpo_step(state, fns.shard_batch(micro))
            for k, v in jax.device_get(step_metrics).items():
                sums[k] = sums.get(k, 0.0) + float(v)
            updates += 1
    return state, {k: v / updates for k, v in sums.items()}
