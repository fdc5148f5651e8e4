"""Skeleton: the smallest complete benchmark, as a package of its own (docs/guides/extend.md).

The task: the traveller has one free day in a city; pick a museum open on that weekday within the
ticket budget. One tool, MuseumHours(city), lists the city's museums with their opening days and
prices. Answer: `{"museum": "..."}`. Every method below is one the Benchmark interface asks for
(sandbox/benchmarks/base.py); copy this file and replace the world, the task and the judge.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sandbox.benchmarks.base import Benchmark, BenchmarkError, Instance, Log, Prompt, TokenCounter
from sandbox.env import EpisodeEnv
from sandbox.expert_session import ExpertSession, tool_call
from sandbox.jsonl import read_jsonl
from sandbox.reward import ACTION_ERROR_PENALTY, Reward
from sandbox.tools.args import Param
from sandbox.tools.dispatch import Tool, dispatch
from sandbox.types import ToolResult

# the world: city -> museum -> (open weekdays, ticket price)
MUSEUMS = {
    "Avalon": {"Map Museum": ("Mon Tue Wed", 12.0), "Sea Hall": ("Thu Fri Sat Sun", 15.0)},
    "Brightwater": {"Clock House": ("Tue Sat", 8.0), "Glass Works": ("Mon Wed Fri Sun", 15.0)},
}
SYSTEM = (
    "You plan a museum visit. Call MuseumHours for the city, then answer with "
    '<answer>{"museum": "..."}</answer>: open on the given day and within the budget.'
)


def _hours(world: Any, args: dict[str, Any]) -> str | ToolResult:
    if args["city"] not in MUSEUMS:
        return ToolResult.error(f"no city {args['city']!r}; cities: {sorted(MUSEUMS)}")
    rows = sorted(MUSEUMS[args["city"]].items())
    return "\n".join(json.dumps({"name": n, "open": days, "price": p}) for n, (days, p) in rows)


TOOLS = {
    "MuseumHours": Tool(
        "MuseumHours",
        "The city's museums with their opening weekdays and ticket price.",
        (Param("city", "string", "the city", required=True),),
        _hours,
    )
}


class MuseumWorld:
    """The World protocol (sandbox.types.World): tool calls never raise, errors come back as text."""

    def call_tool(self, name: str, arguments: dict) -> ToolResult:
        return dispatch(TOOLS, self, name, arguments)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in TOOLS.values()]


@dataclasses.dataclass
class Verdict:
    delivered: bool  # a readable answer shaped like the task
    open_that_day: bool
    within_budget: bool

    @property
    def all_passed(self) -> bool:
        return self.delivered and self.open_that_day and self.within_budget

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def make_pairs(split: str) -> list[Instance]:
    """(visible, truth) per city and weekday; the truth is the query itself (the judge recomputes)."""
    pairs = []
    for city in sorted(MUSEUMS):
        for day in ("Mon", "Sat"):
            query = {"city": city, "day": day, "budget": 16.0}
            text = f"One free {day} in {city}: which museum, tickets at most {query['budget']}?"
            pairs.append(Instance({"id": f"{split}-{city}-{day}", "query": text, **query}, {"query": query}))
    return pairs


class SkeletonBenchmark(Benchmark):
    name = "skeleton"
    splits = ("train", "test")

    @classmethod
    def make_data(cls, out_dir: Path, args: argparse.Namespace, log: Log) -> None:
        """instances/, ground_truth/ and the expert's SFT traces (sft/train.jsonl)."""
        bench = cls(out_dir)
        for split in cls.splits:
            for folder, part in (("instances", 0), ("ground_truth", 1)):
                _write(out_dir / folder / f"{split}.jsonl", [pair[part] for pair in make_pairs(split)])
        _write(out_dir / "sft" / "train.jsonl", [bench.expert_trace(*pair) for pair in make_pairs("train")])
        log("skeleton: data written")

    @classmethod
    def data_ready(cls, data_dir: Path) -> bool:
        return (data_dir / "instances" / "train.jsonl").is_file()

    def load_split(self, split: str) -> list[Instance]:
        if split not in self.splits:
            raise BenchmarkError(f"skeleton has no split {split!r}")
        visible = read_jsonl(self._path("instances", f"{split}.jsonl"), BenchmarkError)
        truth = read_jsonl(self._path("ground_truth", f"{split}.jsonl"), BenchmarkError)
        return [Instance(v, t) for v, t in zip(visible, truth)]

    def world_for(self, visible: dict[str, Any]) -> MuseumWorld:
        return MuseumWorld()

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
        if variant not in self.prompt_variants:
            raise BenchmarkError(f"unknown prompt variant {variant!r}")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": visible["query"]}]
        return Prompt(messages, MuseumWorld().tool_schemas(), memory and variant == "tool_agent")

    def evaluate(self, answer: Any, visible: dict[str, Any], truth: dict[str, Any]) -> Verdict:
        query = truth["query"]
        try:
            name = (json.loads(answer) if isinstance(answer, str) else answer)["museum"]
            days, price = MUSEUMS[query["city"]][name]
        except (TypeError, KeyError, ValueError):  # no answer, not JSON, or no such museum
            return Verdict(False, False, False)
        return Verdict(True, query["day"] in days.split(), price <= query["budget"])

    def reward(
        self, verdict: Any, any_action_error: bool, *, action_penalty: bool = True, format_gate: bool = True
    ) -> Reward:
        """R = P_action + R_format * (R_C + R_UPC), as every benchmark (sandbox/reward.py)."""
        p_action = ACTION_ERROR_PENALTY if (action_penalty and any_action_error) else 0.0
        if verdict is None:
            return Reward(p_action, p_action, 0.0, 0.0, 0.0)
        r_format = 1.0 if verdict.delivered else 0.0
        r_c, r_upc = float(verdict.open_that_day), float(verdict.within_budget)
        return Reward(p_action + r_format * (r_c + r_upc), p_action, r_format, r_c, r_upc)

    def metrics(self, verdicts: Sequence[Verdict]) -> dict[str, Any]:
        n = len(verdicts)
        return {
            "n": n,
            "delivery_rate": sum(v.delivered for v in verdicts) / max(n, 1),
            "final_pass_rate": sum(v.all_passed for v in verdicts) / max(n, 1),
        }

    def format_metrics(self, metrics: dict[str, Any]) -> str:
        return " ".join(f"{k}={v}" for k, v in metrics.items())

    def expert_answers(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, str | None]]:
        for visible, truth in pairs:
            yield visible["id"], self.expert_trace(visible, truth)["answer"]

    def expert_trace(self, visible: dict[str, Any], truth: dict[str, Any]) -> dict[str, Any]:
        """The expert acts through the real EpisodeEnv, so its transcript is what SFT teaches."""
        prompt = self.prompt(visible)
        session = ExpertSession(EpisodeEnv(self.world_for(visible), memory_enabled=prompt.memory))
        query = truth["query"]
        [reply] = session.act("Look up the museums.", calls=[tool_call("MuseumHours", city=query["city"])])
        rows = [json.loads(line) for line in reply.splitlines()]
        fits = [r for r in rows if query["day"] in r["open"].split() and r["price"] <= query["budget"]]
        answer = session.answer("The first museum open that day within budget.", {"museum": fits[0]["name"]})
        return {
            "id": visible["id"],
            "messages": prompt.messages + session.turns,
            "tools": prompt.tools,
            "answer": answer,
        }


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
