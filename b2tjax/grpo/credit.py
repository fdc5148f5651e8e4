"""Credit assignment: one advantage per record when an episode has any number of streams.

A GRPO step's records are the streams of episodes (one per episode for a single agent; a
coordinator plus day executors for HiMAP), and the G episodes of a prompt form its group. The
credit modes (`grpo.credit`):

- "team": the episode's team reward is normalised over the G episodes of its prompt, each episode
  counted once however many streams it has, and every stream of the episode gets that advantage.
- "team_local": the team advantage plus `grpo.local_weight` x a local advantage on the records that
  carry a local reward (a day executor's own day score). The local reward is normalised among
  comparable records: the same prompt, role and day across the group's episodes, bargaining
  rounds pooled (see `local_comparison_keys`).

Host NumPy around the jitted `grpo.group_advantages`: it runs once per step on small arrays, and
today's layout (P*G records, one per episode, groups contiguous) goes through exactly the call the
trainer always made, so its advantages are the same bits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

import jax
import numpy as np

from b2tjax.grpo.modes import CREDIT_MODES
from b2tjax.step import loss as grpo

_group_advantages = jax.jit(grpo.group_advantages, static_argnums=(1, 2, 3))


@dataclasses.dataclass(frozen=True)
class Episodes:
    """Which record belongs to which episode, and each episode's prompt and team reward."""

    of_record: np.ndarray  # [N] int: position (0..E-1) of each record's episode
    group: np.ndarray  # [E] int: prompt index of each episode
    reward: np.ndarray  # [E] float32: the episode's team reward

    @property
    def count(self) -> int:
        return len(self.group)


def episodes_of(
    rewards: Sequence[float],
    group_size: int,
    groups: Sequence[int] | None = None,
    episodes: Sequence[int] | None = None,
) -> Episodes:
    """Episode structure of a step's records. `groups`/`episodes` None: today's layout (record i is
    episode i of prompt i // group_size). A stream whose team reward or prompt differs from the
    rest of its episode is a wiring bug upstream, reported here rather than trained on."""
    rewards = np.asarray(rewards, np.float32)
    n = len(rewards)
    if groups is None:
        if episodes is not None:
            raise ValueError("RolloutBatch.episodes needs RolloutBatch.groups (the prompt of each record)")
        if n % group_size:
            raise ValueError(f"{n} records do not form groups of {group_size} (and no groups were given)")
        groups = np.arange(n) // group_size
    groups = np.asarray(groups, np.int64)
    episode_ids = np.arange(n) if episodes is None else np.asarray(episodes, np.int64)
    if groups.shape != (n,) or episode_ids.shape != (n,):
        raise ValueError(
            f"groups and episodes need one entry per record ({n}), got {groups.shape} and {episode_ids.shape}"
        )
    _, first, of_record = np.unique(episode_ids, return_index=True, return_inverse=True)
    of_record = of_record.reshape(-1)  # NumPy 2.0 returned it in the input's shape
    reward, group = rewards[first], groups[first]
    if not np.array_equal(reward[of_record], rewards, equal_nan=True):
        raise ValueError("every stream of an episode must carry the episode's team reward")
    if not np.array_equal(group[of_record], groups):
        raise ValueError("every stream of an episode must belong to the same prompt group")
    return Episodes(of_record=of_record, group=group, reward=reward)


def normalise_within(values: np.ndarray, set_ids: np.ndarray, eps: float, scale_by_std: bool) -> np.ndarray:
    """(v - mean) / (std + eps) within each set of equal `set_ids` (no std: v - mean); a set of one
    gets 0. Sets of one size are stacked in id order and normalised in one `group_advantages` call,
    so P contiguous sets of G give exactly that function's bits on the flat vector."""
    values = np.asarray(values, np.float32)
    out = np.zeros(len(values), np.float32)
    if not len(values):
        return out
    inverse = np.unique(set_ids, return_inverse=True)[1].reshape(-1)
    members = np.split(np.argsort(inverse, kind="stable"), np.cumsum(np.bincount(inverse))[:-1])
    by_size: dict[int, list[np.ndarray]] = {}
    for idx in members:
        by_size.setdefault(len(idx), []).append(idx)
    for size, sets in by_size.items():
        rows = np.concatenate(sets)
        out[rows] = np.asarray(_group_advantages(values[rows], size, eps, scale_by_std))
    return out


def team_advantages(episodes: Episodes, eps: float, scale_by_std: bool) -> np.ndarray:
    """[N]: each record gets its episode's team reward normalised over its prompt's episodes."""
    per_episode = normalise_within(episodes.reward, episodes.group, eps, scale_by_std)
    return per_episode[episodes.of_record]


def local_comparison_keys(
    groups: Sequence[int], roles: Sequence[str], days: Sequence[int | None]
) -> list[Hashable]:
    """Which records' local rewards are compared: same prompt, same role, same day.

    Day d of one prompt is the same slot of the same trip in every episode of the group (same city
    type of day, same share of the request), so its executors' day scores are comparable; two days
    are not (a travel day and a stay day score on different scales). Bargaining rounds are pooled:
    a re-planned day is still that slot, and rounds past the first happen in only some episodes,
    so keying on the round would leave most of those sets with one record and no signal.
    """
    return [(int(g), role, day) for g, role, day in zip(groups, roles, days, strict=True)]


def local_advantages(
    local_rewards: Sequence[float | None], keys: Sequence[Hashable], eps: float, scale_by_std: bool
) -> np.ndarray:
    """[N]: the local reward normalised among records of equal key; 0 where a record has none."""
    out = np.zeros(len(local_rewards), np.float32)
    present = [i for i, value in enumerate(local_rewards) if value is not None]
    if present:
        key_index: dict[Hashable, int] = {}
        set_ids = np.array([key_index.setdefault(keys[i], len(key_index)) for i in present])
        values = np.array([local_rewards[i] for i in present], np.float32)
        out[present] = normalise_within(values, set_ids, eps, scale_by_std)
    return out


def record_advantages(
    episodes: Episodes,
    *,
    credit: str = "team",
    local_rewards: Sequence[float | None] | None = None,
    local_keys: Sequence[Hashable] | None = None,
    local_weight: float = 0.0,
    eps: float = 1e-6,
    scale_by_std: bool = True,
) -> np.ndarray:
    """[N] float32 advantage of every record under credit mode `credit` (see the module docstring)."""
    if credit not in CREDIT_MODES:
        raise ValueError(f"unknown credit mode {credit!r}; expected one of {CREDIT_MODES}")
    adv = team_advantages(episodes, eps, scale_by_std)
    if credit == "team_local" and local_rewards is not None:
        if local_keys is None or len(local_keys) != len(local_rewards) or len(local_rewards) != len(adv):
            raise ValueError("local rewards and their comparison keys need one entry per record")
        adv = adv + np.float32(local_weight) * local_advantages(local_rewards, local_keys, eps, scale_by_std)
    return adv
