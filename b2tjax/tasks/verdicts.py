"""An evaluation's one source of truth: each episode's answer, verdict and reward, judged once.

The closing table (the benchmark's metrics), the notes above it, eval.json and report.html all read
these objects; nothing downstream judges an answer again. Judging twice is how they came to
disagree: a HiMAP team's answer is the episode's merged plan, which no single record carries, so a
report that re-judged "the coordinator's record" called a delivered plan undelivered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sandbox.benchmarks import Instance
from sandbox.reward import Reward


@dataclasses.dataclass(frozen=True)
class EpisodeVerdict:
    """One judged episode: the answer judged (a HiMAP team's merged plan, a single agent's
    `<answer>`), the benchmark's verdict of it, and the reward the episode earned."""

    instance_id: str
    answer: str | None
    verdict: Any  # the benchmark's Verdict (sandbox.benchmarks.Verdict)
    reward: Reward

    @property
    def delivered(self) -> bool:
        return bool(self.verdict.delivered)

    @property
    def passed(self) -> bool:
        return bool(self.verdict.all_passed)


@dataclasses.dataclass(frozen=True)
class Tally:
    """Counts over judged episodes, for one-line summaries (the tiny-model note)."""

    episodes: int
    delivered: int
    passed: int
    mean_reward: float

    @classmethod
    def of(cls, results: Sequence[EpisodeVerdict]) -> Tally:
        n = len(results)
        mean = sum(r.reward.total for r in results) / n if n else 0.0
        return cls(n, sum(r.delivered for r in results), sum(r.passed for r in results), mean)

    def line(self) -> str:
        """'2/2 plans delivered, 0/2 pass every check, mean reward 0.773'."""
        n = self.episodes
        return (
            f"{self.delivered}/{n} plans delivered, {self.passed}/{n} pass every check, "
            f"mean reward {self.mean_reward:.3f}"
        )


def episode_verdicts(
    pairs: Sequence[Instance],
    answers: Sequence[str | None],
    verdicts: Sequence[Any],
    rewards: Sequence[Reward],
) -> list[EpisodeVerdict]:
    """Zip one evaluation's per-episode lists (all in episode order) into EpisodeVerdicts."""
    if not len(pairs) == len(answers) == len(verdicts) == len(rewards):
        raise ValueError(
            f"{len(pairs)} pairs, {len(answers)} answers, {len(verdicts)} verdicts and {len(rewards)} "
            "rewards: one each per episode"
        )
    return [
        EpisodeVerdict(inst.id, answer, verdict, reward)
        for inst, answer, verdict, reward in zip(pairs, answers, verdicts, rewards)
    ]
