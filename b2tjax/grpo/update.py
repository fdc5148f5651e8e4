"""One GRPO update from a step's scored records: credit, packed rows, old/reference log-probs,
then epochs x mini-batches of optimizer steps.

The records may be any number of streams of the step's episodes (`RolloutBatch.groups` /
`episodes`); `b2tjax.grpo.credit` turns their rewards into advantages (`grpo.credit`: `team` |
`team_local`, docs/concepts/himap.md "Credit assignment") and b2tjax/grpo/packed.py packs them into
token-budget rows (the one layout of a step). `grpo_update(spec, fns, state, batch, seed,
ref_params)` is the whole update, `spec` (`UpdateSpec`) all it reads of the run's config; it
logs `records`, `episodes`, `adv_mean/<role>`, `rows` (rows computed per pass over the records)
and `useful_token_share` (the records' tokens over the tokens computed). It talks to no other JAX
process: every process holds the whole step's batch, and the trainer checks once per step that
they agree (b2tjax/run/agreement.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from b2tjax.config.schema import GRPOConfig
from b2tjax.grpo import credit, offpolicy
from b2tjax.grpo.packed import grpo_rows, packed_update
from b2tjax.step.packing import RowPolicy
from b2tjax.step.train_step import StepFns, TrainState
from rollout.config import RolloutConfig
from rollout.record import EpisodeRecord


@dataclasses.dataclass(frozen=True)
class UpdateSpec:
    """What a GRPO update reads of the run's config: the `grpo:` section (credit, loss, epochs and
    mini-batches), the rows the records pack into, the rollout's group size and staleness bound."""

    grpo: GRPOConfig
    rows: RowPolicy
    group_size: int
    max_staleness: int = 0

    @classmethod
    def of(cls, g: GRPOConfig, rollout: RolloutConfig, rollout_batch: int, row_devices: int) -> UpdateSpec:
        rows = grpo_rows(g, rollout_batch, rollout.max_seq_len, row_devices)
        return cls(g, rows, rollout.group_size, rollout.max_staleness)


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


def batch_advantages(
    g: GRPOConfig, group_size: int, batch: RolloutBatch
) -> tuple[np.ndarray, credit.Episodes]:
    """[N] advantages of the batch's records under `grpo.credit` (prompts of `group_size`
    episodes), and the episode structure."""
    episodes = credit.episodes_of([r.reward for r in batch.records], group_size, batch.groups, batch.episodes)
    # a stream's role and (HiMAP executors) day ride on its record's tag
    keys = credit.local_comparison_keys(
        episodes.group[episodes.of_record],
        [r.role for r in batch.records],
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
    roles = np.array([r.role for r in records])
    for role in sorted(set(roles)):
        metrics[f"adv_mean/{role}"] = float(adv[roles == role].mean())
    return metrics


def informative_records(episodes: credit.Episodes, mini_batches: int) -> np.ndarray:
    """Indices of the records to train on under `grpo.drop_flat_groups`: those of groups whose
    episode rewards differ. Topped up with flat records (advantage 0: no gradient) to at least
    `mini_batches`; empty when no group of the step has a spread."""
    group_of = episodes.group[episodes.of_record]  # [records]
    spread = spread_groups(episodes)
    keep = [i for i, p in enumerate(group_of) if p in spread]
    if not keep:
        return np.zeros(0, np.int64)
    flat = [i for i, p in enumerate(group_of) if p not in spread]
    return np.asarray(keep + flat[: max(mini_batches - len(keep), 0)], np.int64)


def grpo_update(
    spec: UpdateSpec,
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
    g = spec.grpo
    records = batch.records
    adv, episodes = batch_advantages(g, spec.group_size, batch)
    step_metrics = credit_metrics(records, adv, episodes)
    streamed = batch.policy_version is not None
    if streamed:  # over all the step's records, checked before any update
        step_metrics.update(offpolicy.staleness_metrics(records, batch.policy_version, spec.max_staleness))
    if g.drop_flat_groups:
        kept = informative_records(episodes, g.mini_batches)
        step_metrics["trained_records"] = float(len(kept))
        if not len(kept):  # nothing to learn from this step: no forward, no optimizer step
            return state, {**step_metrics, "applied": 0.0}
        records, adv = [records[i] for i in kept], adv[kept]
    state, metrics = packed_update(
        g, spec.rows, fns, state, records, adv, seed, ref_params, before_update, streamed
    )
    return state, {**step_metrics, **metrics}
