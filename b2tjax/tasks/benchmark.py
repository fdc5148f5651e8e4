"""The trainer's Task over any benchmark: data, tokenizer, rollouts, reward, evaluation.

`BenchmarkTask.prepare(cfg)` opens a built DATA (launch/train.py builds it first when absent,
b2tjax.cli.prepare; the task only checks it, `b2tjax.data.marker.check_data_dir`), trains the
SentencePiece tokenizer of the tiny recipe on the benchmark's corpus (or loads the Qwen3 / a
checkpoint tokenizer), and opens the benchmark `cfg.benchmark`. Rollouts run through the
RolloutEngine; rewards are `b2tjax.tasks.scoring.score_records`, i.e. the benchmark's judge and
reward (action penalty and format gate switchable for the ablations). How the final evaluation
samples is an `EvalSampling` passed to `evaluate`, not a change to the task.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
from flax import nnx
from jax.experimental import multihost_utils

from b2tjax.config import TrainConfig
from b2tjax.data.marker import check_data_dir
from b2tjax.errors import UserError
from b2tjax.grpo.update import RolloutBatch
from b2tjax.report.build import record_episodes
from b2tjax.run.mesh import rollout_mesh
from b2tjax.sft.traces import sft_examples
from b2tjax.tasks.eval_report import evaluation_header, model_params
from b2tjax.tasks.scoring import episode_metrics, score_records
from b2tjax.tasks.verdicts import Tally, episode_verdicts
from models.spm import train_sentencepiece
from models.tokenizer import load_tokenizer
from rollout.agents.single import agent_episode
from rollout.engine import RolloutEngine
from rollout.hosts import agree, episode_owner, gather_objects, merge_by_owner
from rollout.prompt import token_counter
from rollout.sampler import Sampler
from rollout.session import RolloutSession
from sandbox.benchmarks import (
    Benchmark,
    BenchmarkError,
    Instance,
    benchmark_class,
    get_benchmark,
    interleave_difficulties,
)
from sandbox.env import EXECUTED
from sandbox.python_tool import PythonSandbox


def load_or_train_tokenizer(cfg: TrainConfig, data_dir: Path, benchmark: Benchmark) -> Any:
    """The run's tokenizer: `cfg.model.tokenizer`, or for "sentencepiece" the tiny recipe's model in
    DATA/tokenizer/, trained once on the benchmark's corpus so later runs and resumes reuse the same ids."""

    spec = cfg.model.tokenizer
    if spec != "sentencepiece":
        return load_tokenizer(spec)

    path = data_dir / "tokenizer" / f"sp{cfg.model.sp_vocab_size}.model"
    if not path.exists() and jax.process_index() == 0:  # one trainer; the other processes wait below
        vocab = cfg.model.sp_vocab_size
        print(f"training a {vocab}-piece SentencePiece tokenizer on the corpus ...", flush=True)
        train_sentencepiece(benchmark.tokenizer_corpus(), path.with_suffix(""), vocab_size=vocab)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("tokenizer trained")
    return load_tokenizer(path)


def select_pairs(benchmark: Benchmark, split: str, difficulties: Sequence[str], limit: int) -> list[Instance]:
    """The split's pairs of these difficulties, levels interleaved, the first `limit` (0 = all): the
    instances a run trains or is evaluated on (benchmarks/results_table.py scores the expert on them)."""
    wanted = set(difficulties)
    pairs = [p for p in benchmark.load_split(split) if (p[0].get("difficulty") or "easy") in wanted]
    return interleave_difficulties(pairs)[:limit] if limit else pairs


@dataclasses.dataclass(frozen=True)
class EvalSampling:
    """How an evaluation samples, passed to `evaluate`: greedy (temperature 0) from a fixed seed by
    default; the other sampling knobs are the recipe's `rollout:` ones."""

    temperature: float = 0.0
    seed: int = 0


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
        self._rollouts = Sampler(tokenizer, rollout_mesh(cfg.mesh))  # the engine, kept across steps
        self._python_pool = None
        self._last_eval: tuple[list, dict | None] | None = None  # records, HiMAP sessions by episode
        self._python_tool()  # refuse an unjailed Python tool at start-up, not after the SFT phase

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> BenchmarkTask:
        data_dir = Path(cfg.data.data_dir)
        check_data_dir(data_dir, cfg.benchmark)
        judge = benchmark_class(cfg.benchmark).judge_options(cfg.judge)
        benchmark = get_benchmark(cfg.benchmark, data_dir, **judge)
        return cls(cfg, benchmark, load_or_train_tokenizer(cfg, data_dir, benchmark))

    def _load_split(self, split: str, limit: int) -> list[Instance]:
        return select_pairs(self.benchmark, split, self.cfg.data.difficulties, limit)

    def _check_prompt_budget(self) -> None:
        """At start-up, not after SFT: the prompt of the largest instance, compacted as far as the
        benchmark can (a B2T trajectory is dropped), must fit rollout.max_prompt_tokens."""

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
                python=r.python_tool,
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
        return sft_examples(
            traces, self.tokenizer, self.cfg.sft.max_seq_len, python=self.cfg.rollout.python_tool
        )

    def _episodes(self, pairs: Sequence[Instance]):

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
            self._python_pool = PythonSandbox(isolation=self.cfg.rollout.python_tool_isolation)
        return self._python_pool

    def _sampler(self, model: nnx.Module, temperature: float) -> RolloutEngine:
        """The engine for `temperature` with the recipe's memory plan: `batch_rows` rows of
        `cache_len` slots on the sampler's mesh, whatever the number of episodes (they stream through
        the rows); built once per temperature, then only given fresh weights (rollout/sampler.py)."""
        return self._rollouts.engine_for(
            model, dataclasses.replace(self.cfg.rollout, temperature=temperature)
        )

    def _run_and_score(
        self,
        model: nnx.Module,
        pairs: Sequence[Instance],
        seed: int,
        temperature: float,
        should_stop=None,
        group_size: int = 1,
    ):
        """One episode per pair, run and scored: (episodes, records, verdicts, rewards). Several
        processes: each runs and scores the episodes it owns (rollout.hosts.episode_owner, a group
        on one process), then every process receives all of them, in episode order."""

        episodes = self._episodes(pairs)
        owners, local = episode_owners(len(pairs), group_size, seed)
        records = self._sampler(model, temperature).run(episodes, seed, should_stop=should_stop, local=local)
        return (episodes, *self._score(records, pairs, owners, local))

    def _score(self, records, pairs, owners, local):
        """(records, verdicts, rewards) of this process' records, then (several processes) everyone's."""
        g = self.cfg.grpo
        mine = [pair for pair, here in zip(pairs, local or [True] * len(pairs)) if here]
        verdicts, rewards = score_records(
            records, mine, self.benchmark, action_penalty=g.action_penalty, format_gate=g.format_gate
        )
        if local is not None:
            scored = merge_by_owner(owners, gather_objects(list(zip(records, verdicts, rewards))))
            records, verdicts, rewards = (list(x) for x in zip(*scored)) if scored else ([], [], [])
        return records, verdicts, rewards

    def _batch(self, episodes: list[Any], records: list[Any], metrics: dict, group_size: int) -> RolloutBatch:
        """The trainer's batch: one record per episode, a prompt's G records contiguous."""
        return RolloutBatch(records, metrics)

    def _agent_metrics(self, episodes: list[Any], records: list[Any]) -> dict[str, Any]:
        """Figures of the agent architecture beside the episode metrics (none for a single agent)."""
        return {}

    def rollout(
        self,
        model: nnx.Module,
        prompts: list[Any],
        group_size: int,
        seed: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> RolloutBatch:

        pairs = [p for p in prompts for _ in range(group_size)]
        temperature = self.cfg.rollout.temperature
        before = EXECUTED.snapshot()
        episodes, records, verdicts, rewards = self._run_and_score(
            model, pairs, seed, temperature, should_stop, group_size
        )
        executed = [now - then for now, then in zip(EXECUTED.snapshot(), before)]
        metrics = self._step_metrics(
            episodes, records, verdicts, rewards, executed, self._rollouts.engine.stats
        )
        return self._batch(episodes, records, metrics, group_size)

    def _step_metrics(self, episodes, records, verdicts, rewards, executed, stats) -> dict[str, Any]:
        return {
            **self.benchmark.headline(self.benchmark.metrics(verdicts)),
            **episode_metrics(records, rewards),
            **self._agent_metrics(episodes, records),
            **host_counts(records, executed, stats),
        }

    # -- streaming (rollout.max_staleness > 0; b2tjax/run/streaming.py) -----------------------------
    def open_session(self, model: nnx.Module, seed: int, rollout: Any) -> RolloutSession:
        """A session on the training engine (the run's `rollout` section: its streaming knobs)."""
        self._executed = EXECUTED.snapshot()
        return self._sampler(model, rollout.temperature).session(seed)

    def submit_stream(self, session: RolloutSession, prompts: list[Any], group_size: int, seed: int):
        """Queue one step's P x G episodes; the handle `collect_stream` takes them back with."""
        pairs = [p for p in prompts for _ in range(group_size)]
        episodes = self._episodes(pairs)
        owners, local = episode_owners(len(pairs), group_size, seed)
        return pairs, episodes, owners, local, session.submit(episodes, local), group_size

    def collect_stream(self, session: RolloutSession, handle, should_stop=None) -> RolloutBatch:
        """Decode until the handle's episodes have finished; their scored batch. The tool runs
        counted are those of every episode running meanwhile (streaming interleaves steps)."""
        pairs, episodes, owners, local, indices, group_size = handle
        records = session.advance(indices, should_stop)
        for record in records:  # numbered within the step, as a plain run numbers them
            record.episode = indices.index(record.episode)
        records, verdicts, rewards = self._score(records, pairs, owners, local)
        now = EXECUTED.snapshot()
        executed, self._executed = [a - b for a, b in zip(now, self._executed)], now
        metrics = self._step_metrics(episodes, records, verdicts, rewards, executed, session.stats)
        return self._batch(episodes, records, metrics, group_size)

    def evaluate(self, model: nnx.Module, sampling: EvalSampling = EvalSampling()) -> tuple[dict, str]:
        """The benchmark's metrics on the eval split, plus the mean reward and the episode metrics
        training logs; (metrics, a printable header and table)."""

        run = self._run_and_score(model, self._eval, sampling.seed, sampling.temperature)
        episodes, records, verdicts, rewards = run
        results = episode_verdicts(self._eval, self._answers(episodes, records), verdicts, rewards)
        self._last_eval = (records, self._report_sessions(episodes), results)  # for report_episodes
        metrics = self.benchmark.metrics([r.verdict for r in results])
        metrics["mean_reward"] = Tally.of(results).mean_reward
        metrics.update(episode_metrics(records, rewards))  # the same episode-level rates as training logs
        metrics.update(self._eval_extras(episodes, records))
        header = evaluation_header(
            f"{self.benchmark.name} evaluation on {len(self._eval)} {self.eval_split} instances "
            f"(temperature {sampling.temperature:g}, {self._eval_setting(episodes, records, metrics)})",
            metrics,
            records,
            self._length_caps(),
            model_params(model),
            Tally.of(results),
        )
        return metrics, header + "\n" + self.benchmark.format_metrics(metrics)

    def _eval_extras(self, episodes: list[Any], records: list[Any]) -> dict[str, Any]:
        """Entries of the evaluation's metrics beyond the shared ones (none for a single agent)."""
        return {}

    def _answers(self, episodes: list[Any], records: list[Any]) -> list[str | None]:
        """The answer judged for each episode: a single agent's is its one record's."""
        return [r.answer for r in records]

    def _length_caps(self) -> str:
        """The limits that truncate an episode, in the recipe's terms (for the evaluation's notes)."""
        r = self.cfg.rollout
        return f"rollout.max_turns={r.max_turns}, rollout.max_turn_tokens={r.max_turn_tokens}"

    def _eval_setting(self, episodes: list[Any], records: list[Any], metrics: dict) -> str:
        """The prompt style, and whether the episodes had memory: the benchmark's prompt decides
        (`Prompt.memory`, which the episode's env follows), not the style's name."""
        memory = bool(episodes) and all(e.env.memory_enabled for e in episodes)
        return f"prompt {self.cfg.rollout.prompt_style}, memory {memory}"

    def _report_sessions(self, episodes: list[Any]) -> dict[int, Any] | None:
        """What the report needs of the episodes beyond their records (HiMAP: Σ's sessions)."""
        return None

    def report_episodes(self) -> list[dict] | None:
        """The HTML report's episodes of the last `evaluate` (None before one): each episode's
        turns decoded from its records, with the verdicts `evaluate` tallied (never judged again)."""
        if self._last_eval is None:
            return None

        records, sessions, results = self._last_eval
        return record_episodes(
            self.benchmark,
            self._eval,
            records,
            self.tokenizer,
            agent="final evaluation",
            sessions=sessions,
            results=results,
        )[0]


def episode_owners(count: int, group_size: int, step: int) -> tuple[list[int], list[bool] | None]:
    """Each episode's owning process and whether it is this one's (None on one process)."""

    processes = jax.process_count()
    owners = [episode_owner(i, group_size, processes, step) for i in range(count)]
    if processes == 1:
        return owners, None
    return owners, [owner == jax.process_index() for owner in owners]


ENGINE_COUNTS = ("generated_tokens", "prefill_tokens", "reused_tokens", "reprefill_tokens", "parks")


def host_counts(records: Sequence[Any], executed: Sequence[int], stats: Any) -> dict[str, float]:
    """The rollout's engine counts (`rollout/...`, rollout.stats.EngineStats summed over processes;
    `rollout/row_occupancy`, the share of row-steps that generated a token)
    and, on several processes, what each one drove: from the records (`record.process` is set by
    the process that ran the stream) its episodes and answered calls, and, counted apart where the
    environments ran (`executed`: sandbox.env.EXECUTED's (tools, answered) during this rollout),
    its tool runs and answered calls. One small collective (every process calls this in step)."""

    everyone = agree(
        [*executed, *(getattr(stats, name) for name in ENGINE_COUNTS), stats.decode_steps, stats.rows]
    )
    out = {f"rollout/{name}": float(everyone[:, 2 + i].sum()) for i, name in enumerate(ENGINE_COUNTS)}
    # generated tokens / (decode steps x rows) over every process' rows. The processes'
    # decode calls are common (rollout/lockstep.py); each counts the steps its own rows needed, so
    # the most any process counted is the run's (exact when every segment's longest row is there).
    row_steps = float(everyone[:, -2].max() * everyone[:, -1].sum())
    out["rollout/row_occupancy"] = out["rollout/generated_tokens"] / max(row_steps, 1.0)
    if jax.process_count() == 1:
        return out
    for p in range(jax.process_count()):
        mine = [r for r in records if r.process == p]
        out[f"hosts/episodes_p{p}"] = float(len({r.episode for r in mine}))
        out[f"hosts/tool_calls_p{p}"] = float(sum(len(r.calls) for r in mine))
        out[f"hosts/tool_runs_p{p}"] = float(everyone[p, 0])
        out[f"hosts/answered_p{p}"] = float(everyone[p, 1])
    return out
