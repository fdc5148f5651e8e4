"""Behaviour2Trip as a Benchmark: the generated world, behaviour-log instances, 32-constraint judge.

The B2T parts stay where they are (sandbox/benchmarks/b2t/world, tools, instances, evaluator, metrics, reward,
expert); this class only binds them to the Benchmark interface. DATA layout: docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.evaluator import EvalResult, evaluate_plan
from sandbox.benchmarks.b2t.expert import Expert
from sandbox.benchmarks.b2t.himap.domain import B2TDomain
from sandbox.benchmarks.b2t.himap.expert import B2TExpertPolicies
from sandbox.benchmarks.b2t.instances.build import build_benchmark
from sandbox.benchmarks.b2t.instances.loader import InstanceFormatError, load_split
from sandbox.benchmarks.b2t.metrics import compute_metrics, format_table
from sandbox.benchmarks.b2t.prompt import VARIANTS, build_prompt
from sandbox.benchmarks.b2t.reward import compute_reward
from sandbox.benchmarks.b2t.tools.registry import B2TTools, tool_schemas
from sandbox.benchmarks.b2t.view import b2t_view
from sandbox.benchmarks.b2t.world.generator import build_world
from sandbox.benchmarks.b2t.world.loader import build_store_from_files
from sandbox.benchmarks.b2t.world.scales import SCALES
from sandbox.benchmarks.b2t.world.store import open_world
from sandbox.benchmarks.base import Benchmark, BenchmarkError, Instance, Log, Prompt, TokenCounter
from sandbox.reward import Reward

NO_PLAN = "no plan was given for this instance"


def log_counts(log: Log, counts: dict[str, int], started: float) -> None:
    """The world's row counts and build time, in one line."""
    rows = ", ".join(f"{k}={v}" for k, v in counts.items())
    log(f"world.sqlite: {rows} ({time.perf_counter() - started:.1f}s)")


class B2TBenchmark(Benchmark):
    """Behaviour2Trip over DATA (world.sqlite, instances/, ground_truth/, sft/)."""

    name = "b2t"
    splits = ("train", "test")
    prompt_variants = VARIANTS

    def __init__(self, data_dir: str | Path | None, *, world: Any = None, **options: Any) -> None:
        """`world` (an open World or a store path) replaces DATA/world.sqlite, for callers that
        hold one already."""
        super().__init__(data_dir, **options)
        if world is None and data_dir is None:
            raise BenchmarkError("the b2t benchmark needs a data directory or a world")
        # The evaluator reads a World or a store path; the tools need an open World (made lazily).
        self._store = world if world is not None else self._path("world.sqlite")
        self._world = None if isinstance(self._store, (str, Path)) else self._store
        self._tools: B2TTools | None = None

    @classmethod
    def over_world(cls, world: Any) -> B2TBenchmark:
        """The benchmark judging against `world`: a World, a store path or a DATA directory."""
        if isinstance(world, (str, Path)) and Path(world).is_dir():
            return cls(world)
        return cls(None, world=world)

    @property
    def world(self) -> Any:
        """The shared read-only world store, opened on first use."""
        if self._world is None:
            if not Path(self._store).exists():
                raise BenchmarkError(f"missing {self._store} (build it with launch/make_data.py)")
            self._world = open_world(self._store)
        return self._world

    # -- data preparation ---------------------------------------------------------------------
    @classmethod
    def add_data_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--from-jsonl",
            type=Path,
            default=None,
            metavar="DIR",
            help="build the store from DIR/<table>.jsonl or .csv files instead of generating it",
        )
        parser.add_argument("--language", default="en", choices=("en", "zh"), help="instruction language")
        parser.add_argument(
            "--world-only", action="store_true", help="write world.sqlite only (no instances)"
        )
        parser.add_argument(
            "--no-expert",
            action="store_true",
            help="skip expert validation and SFT traces (instances are not checked solvable)",
        )
        parser.add_argument(
            "--instances",
            type=int,
            default=None,
            metavar="N",
            help="instances per split and difficulty (default: the scale's)",
        )

    @classmethod
    def make_data(cls, out_dir: Path, args: argparse.Namespace, log: Log) -> dict[str, float]:
        """DATA/world.sqlite (generated or loaded from user files), then unless --world-only the
        instances, ground truth, stats.json and the expert's SFT traces framed by the agent prompt.
        What a resumed build finds finished (world.sqlite, the instances' chunks) is kept."""

        if args.scale not in SCALES:
            raise BenchmarkError(f"unknown --scale {args.scale!r}; choose from {', '.join(sorted(SCALES))}")
        store = out_dir / "world.sqlite"
        started = time.perf_counter()
        if store.exists():  # both builders publish it by one rename once complete
            log("world.sqlite: kept from the unfinished build")
        elif args.from_jsonl is not None:
            log_counts(log, build_store_from_files(args.from_jsonl, store), started)
        else:
            log_counts(log, build_world(store, args.scale, args.seed, args.workers), started)
        timings = {"world": round(time.perf_counter() - started, 1)}
        if args.world_only:
            return timings
        if args.instances is not None and args.instances < 1:
            raise BenchmarkError(f"--instances must be >= 1, got {args.instances}")
        sizes = None if args.instances is None else {"train": args.instances, "test": args.instances}
        started = time.perf_counter()
        result = build_benchmark(
            store,
            out_dir,
            scale=args.scale,
            seed=args.seed,
            language=args.language,
            workers=args.workers,
            use_expert=not args.no_expert,
            log=log,
            prompt_builder=None if args.no_expert else build_prompt,
            sizes=sizes,
        )
        log(f"instances: done ({time.perf_counter() - started:.1f}s; seconds per split {result['timings']})")
        return {**timings, "instances": round(time.perf_counter() - started, 1)}

    @classmethod
    def data_ready(cls, data_dir: Path) -> bool:
        return not cls.missing_data(data_dir)

    @classmethod
    def missing_data(cls, data_dir: Path) -> list[str]:
        return [
            p
            for p in ("world.sqlite", "instances/train.jsonl", "ground_truth/train.jsonl")
            if not (data_dir / p).exists()
        ]

    # -- instances, world, prompt ---------------------------------------------------------------
    def load_split(self, split: str) -> list[Instance]:
        """The split, validated (sandbox.benchmarks.b2t.instances.loader): a bad line is a one-line error."""
        return [Instance(x.visible, x.hidden) for x in self._load(split, with_ground_truth=True)]

    def load_visible(self, split: str) -> list[dict[str, Any]]:
        return [x.visible for x in self._load(split, with_ground_truth=False)]

    def _load(self, split: str, with_ground_truth: bool) -> list[Any]:

        try:
            return load_split(self._path(), split, with_ground_truth=with_ground_truth)
        except InstanceFormatError as err:
            raise BenchmarkError(f"{err} (build the data with launch/make_data.py)") from None

    def world_for(self, visible: dict[str, Any]) -> B2TTools:
        """The agent's tools over the shared store (one face for every instance)."""
        if self._tools is None:
            self._tools = B2TTools(self.world)
        return self._tools

    def prompt(
        self,
        visible: dict[str, Any],
        *,
        variant: str = "tool_agent",
        memory: bool = True,
        max_tokens: int | None = None,
        count_tokens: TokenCounter | None = None,
        python: bool = False,
    ) -> Prompt:
        return build_prompt(
            visible,
            tool_schemas(python=python),
            max_tokens=max_tokens,
            count_tokens=count_tokens,
            memory=memory,
            variant=variant,
        )

    # -- judging --------------------------------------------------------------------------------
    def evaluate(self, answer: Any, visible: dict[str, Any], truth: dict[str, Any]) -> EvalResult:
        return evaluate_plan(NO_PLAN if answer is None else answer, visible, truth, self._store)

    def reward(
        self,
        verdict: EvalResult | None,
        any_action_error: bool,
        *,
        action_penalty: bool = True,
        format_gate: bool = True,
    ) -> Reward:
        return compute_reward(
            verdict, any_action_error, action_penalty=action_penalty, format_gate=format_gate
        )

    def metrics(self, verdicts: Sequence[EvalResult]) -> dict[str, Any]:
        return compute_metrics(verdicts)

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        return format_table(metrics)

    def checks(self, verdict: EvalResult) -> list[tuple[str, bool, str]]:
        return [(r.name, r.passed, r.reason) for r in verdict.results]

    def episode_view(self, visible: dict[str, Any], answer: Any, verdict: EvalResult) -> dict[str, Any]:

        return b2t_view(visible, answer, verdict, self._store)

    def headline(self, metrics: dict[str, Any]) -> dict[str, float]:
        return {
            **super().headline(metrics),
            "micro_pass_c": metrics["c_micro"],
            "micro_pass_upc": metrics["upc_micro"],
        }

    # -- expert and training data ----------------------------------------------------------------
    def expert_answers(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, str | None]]:

        for key, result in self.expert_results(pairs):
            yield key, result.answer

    def expert_results(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, Any]]:

        expert = Expert(self.world)
        for visible, truth in pairs:
            yield visible["id"], expert.solve(visible, truth)

    def plan_names(self, plan: Any) -> list[str]:
        """Each activity's venue name or train/flight number."""
        names = (a.get("name") or a.get("number") for day in plan or [] for a in day.get("activities", []))
        return sorted({str(n) for n in names if n})

    def himap_domain(self, visible: dict[str, Any]) -> Any:

        return B2TDomain(visible, self.world)

    def himap_expert(self, visible: dict[str, Any], truth: dict[str, Any], knobs: Any = None) -> Any:

        return B2TExpertPolicies(visible, truth, knobs)

    def tokenizer_corpus(self) -> list[str]:
        """Tool schemas, expert traces and the train instances' instructions and behaviour events."""
        texts = [json.dumps(tool_schemas(python=True))]
        texts += [m["content"] for trace in self.sft_traces() or [] for m in trace["messages"]]
        for visible, _ in self.load_split("train"):
            texts.append(visible["instruction"])
            texts += [json.dumps(e, ensure_ascii=False) for e in visible.get("trajectory", [])]
        return texts
