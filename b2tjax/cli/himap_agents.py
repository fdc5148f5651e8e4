"""HiMAP as plan-writing agents for launch/eval.py and the notebook: the scripted HiMAP expert, and
a model checkpoint rolled out greedily as a HiMAP team through the RolloutEngine.

Both yield (instance id, merged answer) and keep the per-episode HiMAP figures (rounds, rejections
by code, Σ rejections by code, phase times) in `figures`, which `summary` turns into one line.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from b2tjax.errors import UserError
from b2tjax.run.policy import ROLLOUT_DEFAULTS
from sandbox.benchmarks import Benchmark, Instance
from sandbox.himap.figures import SessionFigures
from sandbox.himap.options import HimapOptions

if TYPE_CHECKING:  # the rollout package starts JAX; launch/eval.py imports this module without it
    from rollout.config import RolloutConfig


def team_rollout(config: RolloutConfig, options: HimapOptions) -> RolloutConfig:
    """The engine config a HiMAP team runs under: `config`, greedy, with its turn cap raised to the
    roles' own limits (each role's environment enforces its max_turns; an engine cap below one is a
    stream that cannot start, and the episode would end in an error before any turn)."""
    roles = (options.limits("coordinator").max_turns or 0, options.limits("executor").max_turns or 0)
    return dataclasses.replace(config, max_turns=max(config.max_turns, *roles), temperature=0.0)


@dataclasses.dataclass
class HimapFigures:
    """Per-episode HiMAP figures of an agent's run (each session's `figures()`); with `views` a dict,
    also each episode's report view (b2tjax.report.himap) by instance id."""

    episodes: list[SessionFigures] = dataclasses.field(default_factory=list)
    views: dict[str, dict[str, Any]] | None = None

    def summary(self) -> str:
        """One line: episodes, mean rounds, rejections and Σ rejections by code (totals)."""
        n = len(self.episodes)
        if not n:
            return "HiMAP: no episodes"
        rounds = sum(f.rounds for f in self.episodes) / n
        rejections: collections.Counter[str] = collections.Counter()
        sigma: collections.Counter[str] = collections.Counter()
        for f in self.episodes:
            rejections.update(f.rejections)
            sigma.update(f.sigma_rejections)
        rejected, sigma_rejected = dict(sorted(rejections.items())), dict(sorted(sigma.items()))
        return (
            f"HiMAP: {n} episodes, mean rounds {rounds:.2f}, executor rejections {rejected}, "
            f"Σ rejections {sigma_rejected}"
        )


def expert_answers(
    bench: Benchmark, pairs: Sequence[Instance], options: HimapOptions, figures: HimapFigures
) -> Iterator[tuple[str, str | None]]:
    """The scripted HiMAP expert's merged plan per pair (it reads the hidden truth, as the
    single-agent expert does). A benchmark without a HiMAP domain or expert is a UserError."""
    from sandbox.himap.scripted import solve

    for inst in pairs:
        try:
            result = solve(bench, inst.visible, inst.truth, options)
        except ValueError as err:  # no HiMAP domain / scripted expert for this benchmark
            raise UserError(str(err)) from None
        figures.episodes.append(result.figures)
        if figures.views is not None:
            from b2tjax.report.himap import himap_view, streams_from_traces

            figures.views[inst.id] = himap_view(result.session, streams_from_traces(result.traces))
        yield inst.id, result.answer


def checkpoint_answers(
    bench: Benchmark,
    pairs: Sequence[Instance],
    checkpoint: Path,
    options: HimapOptions,
    rollout_overrides: dict[str, Any],
    figures: HimapFigures,
) -> Iterator[tuple[str, str | None]]:
    """Greedy HiMAP episodes of the model in `checkpoint` (a training run's checkpoints/, a model
    checkpoint or a Hugging Face directory, with its tokenizer beside the weights)."""
    from b2tjax.run.policy import load_policy
    from rollout import RolloutEngine
    from rollout.agents.himap import himap_episode

    try:
        # The engine's defaults for a policy rolled out without a recipe, under the team's own
        # turn limits, greedy (team_rollout).
        config = team_rollout(dataclasses.replace(ROLLOUT_DEFAULTS, **rollout_overrides), options)
        policy = load_policy(checkpoint)
    except ValueError as err:
        raise UserError(str(err)) from None
    model, tokenizer = policy.model, policy.tokenizer
    episodes = [himap_episode(inst.visible, bench, tokenizer, options) for inst in pairs]
    records = RolloutEngine(model, tokenizer, config).run(episodes, rng=0)
    for index, (episode, inst) in enumerate(zip(episodes, pairs)):
        figures.episodes.append(episode.session.figures())
        if figures.views is not None:
            from b2tjax.report.himap import himap_view, streams_from_records

            streams = streams_from_records([r for r in records if r.episode == index], tokenizer)
            figures.views[inst.id] = himap_view(episode.session, streams)
        yield inst.id, episode.answer
