"""TravelPlanner as a Benchmark (sandbox.benchmarks.base): binds database, tools, prompt, evaluator,
reward, metrics and expert to the interface that rollout, training, eval and the notebook use.

DATA layout (written by `launch/make_data.py --benchmark travelplanner`, see prepare.py):
    DATA/database/                     the official database files (self-contained copy)
    DATA/instances/{train,dev}.jsonl     visible: id, split, difficulty (= level), query (text), days
    DATA/ground_truth/{train,dev}.jsonl  hidden: id, query (structured), cities (reference, route order)
    DATA/reference/{train,dev}.jsonl     id, reference_info (the official blocks; sole-planning prompt)
    DATA/sft/train.jsonl                 expert traces {id, messages, tools}
    DATA/stats.json
The train split is the 45 official training queries plus generated ones; dev is generated only
(held out, for evaluation during training). Validation and test queries are never written here: a
user passes the official file with `queries=` (`--queries`).
Options: `planning` two-stage | sole-planning, `mode` official | strict (evaluator),
`queries` (an official-format query file, read as the split being evaluated).
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.base import Benchmark, BenchmarkError, Instance, Log, Prompt, TokenCounter
from sandbox.benchmarks.travelplanner import prompt as tp_prompt
from sandbox.benchmarks.travelplanner.database import Database, DatabaseError
from sandbox.benchmarks.travelplanner.evaluator import (
    COMMONSENSE_NAMES,
    HARD_NAMES,
    MODES,
    Evaluation,
    evaluate,
)
from sandbox.benchmarks.travelplanner.expert import TravelPlannerExpert
from sandbox.benchmarks.travelplanner.himap.domain import TravelPlannerDomain
from sandbox.benchmarks.travelplanner.himap.expert import TravelPlannerExpertPolicies
from sandbox.benchmarks.travelplanner.himap.pricing import TravelPlannerPricing
from sandbox.benchmarks.travelplanner.loader import LoaderError, read_queries
from sandbox.benchmarks.travelplanner.metrics import breakdown, compute_metrics, format_table
from sandbox.benchmarks.travelplanner.plan_reader import read_plan
from sandbox.benchmarks.travelplanner.prepare import PrepareError, add_data_arguments, make_data
from sandbox.benchmarks.travelplanner.query import normalize_query
from sandbox.benchmarks.travelplanner.reference import render_reference_info
from sandbox.benchmarks.travelplanner.reward import compute_reward, shaped_like_trip
from sandbox.benchmarks.travelplanner.text import plan_names
from sandbox.benchmarks.travelplanner.tools import NoToolWorld, TravelPlannerWorld
from sandbox.benchmarks.travelplanner.view import travelplanner_view
from sandbox.jsonl import read_jsonl_by_id
from sandbox.reward import Reward


@dataclass(frozen=True)
class TravelPlannerVerdict:
    """One plan's Evaluation with what metrics and the reward need about its query."""

    evaluation: Evaluation
    shaped: bool  # delivered with exactly `days` day entries (the reward's R_format)
    query: dict[str, Any]  # normalised (metrics group by level and days)

    @property
    def delivered(self) -> bool:
        return self.evaluation.delivered

    @property
    def all_passed(self) -> bool:
        return self.evaluation.final_pass

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.evaluation.to_dict(),
            "shaped": self.shaped,
            "level": self.query.get("level"),
            "days": self.query["days"],
        }


# What the closing table says of its numbers, by evaluator mode.
_JUDGED = {
    "official": "judged in official mode (the harness's verdicts, as published numbers are)",
    "strict": "judged in strict mode (what training rewards; published numbers use official mode)",
}


class TravelPlannerBenchmark(Benchmark):
    name = "travelplanner"
    splits = ("train", "dev", "validation", "test")
    data_splits = ("train", "dev")  # written by make_data; the official ones come from users
    eval_split = "dev"  # held-out generated queries: never validation or test

    def __init__(
        self,
        data_dir: str | Path | None,
        *,
        planning: str = "two-stage",
        mode: str = "official",
        queries: str | Path | None = None,
        **options: Any,
    ) -> None:
        super().__init__(data_dir, **options)
        if planning not in tp_prompt.MODES:
            raise BenchmarkError(f"unknown planning mode {planning!r}; choose from {tp_prompt.MODES}")
        if mode not in MODES:
            raise BenchmarkError(f"unknown evaluation mode {mode!r}; choose from {MODES}")
        self.planning, self.eval_mode = planning, mode
        self.queries = Path(queries) if queries is not None else None
        self._db: Database | None = None
        self._references: dict[str, dict[str, Any]] = {}

    # -- options --------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--planning",
            default="two-stage",
            choices=tp_prompt.MODES,
            help="TravelPlanner setting: tools (two-stage) or reference information in "
            "the prompt (sole-planning)",
        )
        parser.add_argument(
            "--mode",
            default="official",
            choices=MODES,
            help="evaluator: the official harness's verdicts or the strict fixes",
        )
        parser.add_argument(
            "--queries",
            type=Path,
            default=None,
            help="an official TravelPlanner query file (the Hugging Face dataset's validation.csv / "
            "test.csv, or JSONL) to use as the split",
        )

    @classmethod
    def options_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        return {"planning": args.planning, "mode": args.mode, "queries": args.queries}

    @classmethod
    def judge_options(cls, judge: str) -> dict[str, Any]:
        """Training judges in `strict` mode by default: `official` pays full reward for plans that
        teleport, invent their last attraction or name a place by a fragment (README.md)."""
        return {"mode": judge}

    # -- data preparation -----------------------------------------------------------------------
    @classmethod
    def add_data_arguments(cls, parser: argparse.ArgumentParser) -> None:

        add_data_arguments(parser)

    @classmethod
    def make_data(cls, out_dir: Path, args: argparse.Namespace, log: Log) -> None:

        try:
            make_data(out_dir, args, log)
        except (PrepareError, DatabaseError) as err:
            raise BenchmarkError(str(err)) from None

    @classmethod
    def data_ready(cls, data_dir: Path) -> bool:
        return not cls.missing_data(data_dir)

    @classmethod
    def missing_data(cls, data_dir: Path) -> list[str]:
        files = [
            f"{folder}/{split}.jsonl"
            for split in cls.data_splits
            for folder in ("instances", "ground_truth", "reference")
        ]
        return [p for p in ("database", *files) if not (data_dir / p).exists()]

    # -- database, instances ----------------------------------------------------------------------
    @property
    def db(self) -> Database:
        if self._db is None:
            path = self._path("database")
            if not path.is_dir():
                raise BenchmarkError(
                    f"missing {path} (build it with launch/make_data.py --benchmark travelplanner)"
                )
            self._db = Database.from_dir(path)
        return self._db

    def load_split(self, split: str) -> list[Instance]:
        if split not in self.splits:
            raise BenchmarkError(f"unknown split {split!r}; choose from {self.splits}")
        if self.queries is not None:
            return self._user_queries(split)
        if split not in self.data_splits:
            raise BenchmarkError(
                f"the {split} queries are not in the data directory; pass the official "
                f"file with --queries (training evaluates on the generated dev split)"
            )
        visible = list(_read_jsonl(self._path("instances", f"{split}.jsonl")).values())
        truth = _read_jsonl(self._path("ground_truth", f"{split}.jsonl"))
        for ident, row in _read_jsonl(self._path("reference", f"{split}.jsonl")).items():
            self._references[ident] = row["reference_info"]
        missing = [v["id"] for v in visible if v["id"] not in truth]
        if missing:
            raise BenchmarkError(f"ground_truth/{split}.jsonl lacks instance {missing[0]!r}")
        return [Instance(v, truth[v["id"]]) for v in visible]

    def _user_queries(self, split: str) -> list[Instance]:
        """An official dataset file (CSV or JSONL): its structured queries, and the reference
        information of each (`reference_information`, a Python literal there) when present."""
        try:
            queries = read_queries(self.queries)
        except LoaderError as err:
            raise BenchmarkError(str(err)) from None
        pairs = []
        for i, query in enumerate(queries):
            ident = f"{split}-{i:04d}"
            ref = query.pop("reference_information", None)
            if ref is not None:
                ref = ast.literal_eval(ref) if isinstance(ref, str) else ref
                self._references[ident] = _reference_dict(ref)
                self.db.add_reference_block(self._references[ident])
            pairs.append(
                Instance(
                    {
                        "id": ident,
                        "split": split,
                        "difficulty": query.get("level"),
                        "query": query.get("query") or "",
                        "days": query["days"],
                    },
                    {"id": ident, "query": query, "cities": None},
                )
            )
        return pairs

    # -- world and prompt -----------------------------------------------------------------------
    def world_for(self, visible: dict[str, Any]) -> Any:
        return TravelPlannerWorld(self.db) if self.planning == "two-stage" else NoToolWorld()

    def prompt(
        self,
        visible: dict[str, Any],
        *,
        variant: str = "tool_agent",
        memory: bool = True,
        max_tokens: int | None = None,
        count_tokens: TokenCounter | None = None,
        python: bool = False,  # TravelPlanner offers no Python tool
    ) -> Prompt:
        reference = None
        if self.planning == "sole-planning":
            info = self._references.get(visible["id"])
            if info is None:
                raise BenchmarkError(f"no reference information for {visible['id']!r}")
            reference = render_reference_info(info)
        return tp_prompt.build_prompt(
            visible["query"],
            TravelPlannerWorld(self.db).tool_schemas(),
            mode=self.planning,
            reference_text=reference,
            variant=variant,
            memory=memory,
            max_tokens=max_tokens,
            count_tokens=count_tokens,
        )

    # -- judging --------------------------------------------------------------------------------
    def evaluate(self, answer: Any, visible: dict[str, Any], truth: dict[str, Any]) -> TravelPlannerVerdict:
        plan = answer if answer is None or isinstance(answer, list) else read_plan(str(answer))
        query = normalize_query(truth["query"])
        evaluation = evaluate(query, plan, self.db, mode=self.eval_mode)
        return TravelPlannerVerdict(evaluation, shaped_like_trip(plan, query["days"]), query)

    def reward(
        self,
        verdict: TravelPlannerVerdict | None,
        any_action_error: bool,
        *,
        action_penalty: bool = True,
        format_gate: bool = True,
    ) -> Reward:
        return compute_reward(
            None if verdict is None else verdict.evaluation,
            verdict is not None and verdict.shaped,
            any_action_error,
            action_penalty=action_penalty,
            format_gate=format_gate,
        )

    def metrics(self, verdicts: Sequence[TravelPlannerVerdict]) -> dict[str, Any]:
        """The official rates over these verdicts (N and the hard denominator derived from their
        queries, which equal the official constants on a whole official split), plus
        "per_level_days" {"hard-5": rates, ...}."""
        queries, results = [v.query for v in verdicts], [v.evaluation for v in verdicts]
        groups = {f"{level}-{days}": row for (level, days), row in breakdown(queries, results).items()}
        rates = compute_metrics(queries, results)
        return {**rates, "n": len(verdicts), "judge": self.eval_mode, "per_level_days": groups}

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        groups = {
            (key.rsplit("-", 1)[0], int(key.rsplit("-", 1)[1])): row
            for key, row in metrics.get("per_level_days", {}).items()
        }
        judged = _JUDGED[metrics.get("judge", self.eval_mode)]
        return f"n = {metrics['n']}; {judged}\n" + format_table(metrics, groups)

    def checks(self, verdict: TravelPlannerVerdict) -> list[tuple[str, bool, str]]:
        """The 8 commonsense then the 5 hard checks; a hard check not applicable passes, and every
        hard check fails when the sandbox/completeness gate did."""
        e = verdict.evaluation
        rows = [(name, e.commonsense.get(name) is not False, "commonsense") for name in COMMONSENSE_NAMES]
        for name in HARD_NAMES:
            if e.hard is None:
                rows.append((name, False, "hard; not judged: the sandbox/completeness gate failed"))
            else:
                value = e.hard.get(name)
                rows.append((name, value is not False, "hard; not applicable" if value is None else "hard"))
        return rows

    def episode_view(
        self, visible: dict[str, Any], answer: Any, verdict: TravelPlannerVerdict
    ) -> dict[str, Any]:

        return travelplanner_view(visible, answer, self.checks(verdict), self.db)

    def headline(self, metrics: dict[str, Any]) -> dict[str, float]:
        return {
            **super().headline(metrics),
            "commonsense_micro": metrics["commonsense_micro"],
            "hard_micro": metrics["hard_micro"],
        }

    # -- expert ---------------------------------------------------------------------------------
    def expert_answers(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, str | None]]:

        for key, result in self.expert_results(pairs):
            yield key, result.answer if result is not None else None

    def expert_results(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, Any]]:
        """None for a query without reference cities (the expert plans over them)."""
        expert = TravelPlannerExpert(TravelPlannerWorld(self.db))
        for visible, truth in pairs:
            yield visible["id"], (expert.solve(visible, truth) if truth.get("cities") else None)

    def plan_names(self, plan: Any) -> list[str]:
        """Each day's flight numbers, meals, attractions and stays (the name before ", City")."""
        return plan_names(plan)

    def himap_domain(self, visible: dict[str, Any]) -> Any:

        return TravelPlannerDomain(visible, self)

    def himap_expert(self, visible: dict[str, Any], truth: dict[str, Any], knobs: Any = None) -> Any:

        pricing = TravelPlannerPricing(truth["query"], self.db, self.eval_mode)
        return TravelPlannerExpertPolicies(visible, truth, pricing)

    def tokenizer_corpus(self) -> list[str]:
        texts = [json.dumps(TravelPlannerWorld(self.db).tool_schemas())]
        texts += [m["content"] for trace in self.sft_traces() or [] for m in trace["messages"]]
        texts += [visible["query"] for visible, _ in self.load_split("train")]
        return texts


def _reference_dict(ref: Any) -> dict[str, Any]:
    """Official reference information: a dict, or the dataset's list of {Description, Content}."""
    if isinstance(ref, dict):
        return ref
    return {item["Description"]: item["Content"] for item in ref}


def _read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    """A data file's rows by id (one line per id)."""
    try:
        return read_jsonl_by_id(Path(path), BenchmarkError)
    except OSError as err:
        raise BenchmarkError(
            f"cannot read {path} ({err.strerror}); build the data with launch/make_data.py "
            "--benchmark travelplanner"
        ) from None
