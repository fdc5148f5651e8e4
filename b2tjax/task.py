"""The trainer's Task over any benchmark: data, tokenizer, rollouts, reward, evaluation.

`BenchmarkTask.prepare(cfg)` makes a fresh machine ready: it builds DATA with launch/make_data.py
when absent (b2tjax.prepare), trains the SentencePiece tokenizer of the tiny recipe on the
benchmark's corpus (or loads the Qwen3 / a checkpoint tokenizer), and opens the benchmark
`cfg.benchmark`. Rollouts run through the RolloutEngine; rewards are `rollout.scoring.score_records`,
i.e. the benchmark's judge and reward (action penalty and format gate switchable for the ablations).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flax import nnx

from b2tjax.cli import UserError
from b2tjax.config import TrainConfig
from b2tjax.prepare import ensure_data
from b2tjax.sft import sft_examples
from b2tjax.trainer import RolloutBatch
from sandbox.benchmarks import Benchmark, BenchmarkError, Pair, get_benchmark, interleave_difficulties


def load_or_train_tokenizer(cfg: TrainConfig, data_dir: Path, benchmark: Benchmark) -> Any:
    """The run's tokenizer: `cfg.model.tokenizer`, or for "sentencepiece" the tiny recipe's model in
    DATA/tokenizer/, trained once on the benchmark's corpus so later runs and resumes reuse the same ids."""
    from models.tokenizer import load_tokenizer

    spec = cfg.model.tokenizer
    if spec != "sentencepiece":
        return load_tokenizer(spec)
    path = data_dir / "tokenizer" / f"sp{cfg.model.sp_vocab_size}.model"
    if not path.exists():
        from models.spm import train_sentencepiece

        vocab = cfg.model.sp_vocab_size
        print(f"training a {vocab}-piece SentencePiece tokenizer on the corpus ...", flush=True)
        train_sentencepiece(benchmark.tokenizer_corpus(), path.with_suffix(""), vocab_size=vocab)
    return load_tokenizer(path)


def select_pairs(benchmark: Benchmark, split: str, difficulties: Sequence[str], limit: int) -> list[Pair]:
    """The split's pairs of these difficulties, levels interleaved, the first `limit` (0 = all): the
    instances a run trains or is evaluated on (benchmarks/results_table.py scores the expert on them)."""
    wanted = set(difficulties)
    pairs = [p for p in benchmark.load_split(split) if (p[0].get("difficulty") or "easy") in wanted]
    return interleave_difficulties(pairs)[:limit] if limit else pairs


def episode_metrics(records: Sequence[Any], rewards: Sequence[Any]) -> dict[str, float]:
    """Episode-level rates beside the benchmark's pass rates: reward components, action errors
    (an episode with any failed tool / memory call or malformed turn), turn-cap truncations, turns."""
    if not records:
        return {}
    return {
        "r_format": float(np.mean([r.r_format for r in rewards])),
        "p_action": float(np.mean([r.p_action for r in rewards])),
        "action_error_rate": float(np.mean([rec.any_error for rec in records])),
        "truncated_rate": float(np.mean([rec.truncated for rec in records])),
        "turns": float(np.mean([len(rec.turns) for rec in records])),
    }


class BenchmarkTask:
    """The trainer's Task for one benchmark: its instances as prompts, sandbox rollouts, its rewards."""

    def __init__(self, cfg: TrainConfig, benchmark: Benchmark, tokenizer: Any):
        self.cfg = cfg
        self.benchmark = benchmark
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self._train = self._load_split(cfg.data.train_split, cfg.data.max_train_instances)
        self.eval_split = cfg.data.eval_split or benchmark.eval_split
        self._eval = self._load_split(self.eval_split, cfg.data.eval_instances)
        self._check_prompt_budget()
        self._engine = None
        self._python_pool = None
        self._last_eval: tuple[list, dict | None] | None = None  # records, HiMAP sessions by episode
        self._python_tool()  # refuse an unjailed Python tool at start-up, not after the SFT phase

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> BenchmarkTask:
        data_dir = Path(cfg.data.data_dir)
        ensure_data(data_dir, cfg.data.world_scale, cfg.benchmark)
        benchmark = get_benchmark(cfg.benchmark, data_dir)
        return cls(cfg, benchmark, load_or_train_tokenizer(cfg, data_dir, benchmark))

    def _load_split(self, split: str, limit: int) -> list[Pair]:
        return select_pairs(self.benchmark, split, self.cfg.data.difficulties, limit)

    def _check_prompt_budget(self) -> None:
        """At start-up, not after SFT: the prompt of the largest instance, compacted as far as the
        benchmark can (a B2T trajectory is dropped), must fit rollout.max_prompt_tokens."""
        from rollout.prompt import token_counter

        r = self.cfg.rollout
        budget = r.prompt_budget
        instances = [visible for visible, _ in self._train + self._eval]
        if not instances:
            return
        largest = max(instances, key=lambda visible: len(json.dumps(visible)))
        try:
            self.benchmark.prompt(
                largest,
                variant=r.prompt_style,
                memory=r.memory_enabled,
                max_tokens=budget,
                count_tokens=token_counter(self.tokenizer),
            )
        except BenchmarkError as err:
            raise UserError(f"rollout.max_prompt_tokens={budget} is too small: {err}") from None

    # -- Task protocol --------------------------------------------------------------------------
    def train_examples(self) -> Sequence[Any]:
        return self._train

    def sft_examples(self) -> list[dict] | None:
        traces = self.benchmark.sft_traces(self.cfg.sft.max_examples)
        if traces is None:
            return None
        return sft_examples(traces, self.tokenizer, self.cfg.sft.max_seq_len)

    def _engine_for(self, model: nnx.Module, temperature: float):
        """An engine with the recipe's memory plan: `batch_rows` rows of `cache_len` slots on the
        run's mesh, whatever the number of episodes (they stream through the rows)."""
        from b2tjax.mesh import build_mesh
        from rollout.engine import RolloutEngine

        config = dataclasses.replace(self.cfg.rollout, temperature=temperature)
        return RolloutEngine(model, self.tokenizer, config, mesh=build_mesh(self.cfg.mesh))

    def _episodes(self, pairs: Sequence[tuple[dict, dict]]):
        from rollout.agents.single import agent_episode

        r = self.cfg.rollout
        return [
            agent_episode(
                inst,
                self.benchmark,
                self.tokenizer,
                max_turns=r.max_turns,
                max_prompt_tokens=r.prompt_budget,
                memory=r.memory_enabled,
                variant=r.prompt_style,
                max_response_chars=r.max_response_chars,
                python_tool=self._python_tool(),
            )
            for inst, _ in pairs
        ]

    def _python_tool(self):
        if not self.cfg.rollout.python_tool:
            return None
        if self._python_pool is None:
            from sandbox.python_tool import PythonSandbox

            self._python_pool = PythonSandbox(isolation=self.cfg.rollout.python_tool_isolation)
        return self._python_pool

    def _score(self, records, pairs) -> tuple[list, list]:
        from rollout.scoring import score_records

        g = self.cfg.grpo
        return score_records(
            records, pairs, self.benchmark, action_penalty=g.action_penalty, format_gate=g.format_gate
        )

    def _sampler(self, model: nnx.Module):
        """The training engine, built (and compiled) once; later rollouts only refresh its weights."""
        if self._engine is None:
            self._engine = self._engine_for(model, self.cfg.rollout.temperature)
        else:
            self._engine.update_weights(model)
        return self._engine

    def rollout(
        self,
        model: nnx.Module,
        prompts: list[Any],
        group_size: int,
        seed: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> RolloutBatch:
        pairs = [p for p in prompts for _ in range(group_size)]
        records = self._sampler(model).run(self._episodes(pairs), seed, should_stop=should_stop)
        evals, rewards = self._score(records, pairs)
        headline = self.benchmark.headline(self.benchmark.metrics(evals))
        return RolloutBatch(records, {**headline, **episode_metrics(records, rewards)})

    def evaluate(self, model: nnx.Module) -> tuple[dict, str]:
        self._engine = None  # the training sampler's weights make room for the greedy one's
        engine = self._engine_for(model, temperature=0.0)  # greedy
        records = engine.run(self._episodes(self._eval), 0)
        self._last_eval = (records, None)  # for report_episodes
        evals, rewards = self._score(records, self._eval)
        metrics = self.benchmark.metrics(evals)
        metrics["mean_reward"] = float(np.mean([x.total for x in rewards])) if rewards else 0.0
        metrics.update(episode_metrics(records, rewards))  # the same episode-level rates as training logs
        r = self.cfg.rollout
        header = (
            f"{self.benchmark.name} evaluation on {len(self._eval)} {self.eval_split} instances "
            f"(greedy, prompt {r.prompt_style}, "
            f"memory {r.memory_enabled and r.prompt_style == 'tool_agent'}); "
            f"mean reward {metrics['mean_reward']:.3f}, "
            f"action error rate {metrics.get('action_error_rate', 0.0):.3f}"
        )
        return metrics, header + "\n" + self.benchmark.format_metrics(metrics)

    def report_episodes(self) -> list[dict] | None:
        """The HTML report's episodes of the last `evaluate` (None before one): each episode's
        turns decoded from its records, judged again (cheap next to the rollout)."""
        if self._last_eval is None:
            return None
        from b2tjax.report.build import record_episodes

        records, sessions = self._last_eval
        episodes, _ = record_episodes(
            self.benchmark, self._eval, records, self.tokenizer, agent="final evaluation", sessions=sessions
        )
        return episodes
