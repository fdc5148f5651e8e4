"""Tiny Trip as a Benchmark: plan one lunch per day in one city, within a budget, never the same
place twice. Answer: `[{"day": 1, "restaurant": "..."}, ...]`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sandbox.benchmarks.base import Benchmark, BenchmarkError, Instance, Log, Prompt, TokenCounter
from sandbox.env import EpisodeEnv
from sandbox.expert_session import ExpertFailure, ExpertSession, tool_call
from sandbox.jsonl import read_jsonl
from sandbox.reward import ACTION_ERROR_PENALTY, Reward
from tests.tiny_trip.world import RESTAURANTS, TinyTripWorld, price

SYSTEM = (
    'You plan lunches. Call RestaurantLookup for the city, then answer with <answer>[{"day": 1, '
    '"restaurant": "..."}, ...]</answer>: one place per day, none twice, total within the budget.'
)
C_CHECKS, UPC_CHECKS = ("known_restaurant", "within_budget"), ("no_repeat",)


@dataclasses.dataclass
class TinyVerdict:
    delivered: bool
    checks: dict[str, bool]

    @property
    def all_passed(self) -> bool:
        return self.delivered and all(self.checks.values())

    def fraction(self, names: Sequence[str]) -> float:
        return sum(self.checks.get(n, False) for n in names) / len(names) if self.delivered else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def make_pairs(split: str) -> list[Instance]:
    """Two instances per city: a 2-day and a 3-day trip, budget 1.5x the cheapest distinct lunches."""
    pairs = []
    for city, places in sorted(RESTAURANTS.items()):
        for days in (2, 3):
            cheapest = sorted(places.values())[:days]
            query = {"city": city, "days": days, "budget": round(1.5 * sum(cheapest), 2)}
            text = f"Plan {days} days of lunches in {city} within {query['budget']} USD."
            pairs.append(({"id": f"{split}-{city}-{days}", "query": text, **query}, {"query": query}))
    return pairs


class TinyTripBenchmark(Benchmark):
    name = "tiny_trip"
    splits = ("train", "test")

    @classmethod
    def make_data(cls, out_dir: Path, args: argparse.Namespace, log: Log) -> None:
        bench = cls(out_dir)
        for split in cls.splits:
            pairs = make_pairs(split)
            for folder, index in (("instances", 0), ("ground_truth", 1)):
                _write(out_dir / folder / f"{split}.jsonl", [pair[index] for pair in pairs])
        traces = [bench.expert_trace(visible, truth) for visible, truth in make_pairs("train")]
        _write(out_dir / "sft" / "train.jsonl", traces)
        log(f"tiny_trip: {len(traces)} expert traces")

    @classmethod
    def data_ready(cls, data_dir: Path) -> bool:
        return (data_dir / "sft" / "train.jsonl").is_file()

    def load_split(self, split: str) -> list[Instance]:
        if split not in self.splits:
            raise BenchmarkError(f"tiny_trip has no split {split!r}")
        visible = read_jsonl(self._path("instances", f"{split}.jsonl"), BenchmarkError)
        truth = read_jsonl(self._path("ground_truth", f"{split}.jsonl"), BenchmarkError)
        return [Instance(v, t) for v, t in zip(visible, truth)]

    def world_for(self, visible: dict[str, Any]) -> TinyTripWorld:
        return TinyTripWorld()

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
        return Prompt(messages, TinyTripWorld().tool_schemas(), memory and variant == "tool_agent")

    def evaluate(self, answer: Any, visible: dict[str, Any], truth: dict[str, Any]) -> TinyVerdict:
        query = truth["query"]
        try:
            plan = json.loads(answer) if isinstance(answer, str) else answer
            names = [day["restaurant"] for day in plan]
        except (TypeError, KeyError, ValueError):
            return TinyVerdict(False, {})
        prices = [price(query["city"], name) for name in names]
        checks = {
            "known_restaurant": None not in prices,
            "within_budget": None not in prices and sum(prices) <= query["budget"],
            "no_repeat": len(set(names)) == len(names),
        }
        return TinyVerdict(len(names) == query["days"], checks)

    def reward(
        self, verdict: Any, any_action_error: bool, *, action_penalty: bool = True, format_gate: bool = True
    ) -> Reward:
        p_action = ACTION_ERROR_PENALTY if (action_penalty and any_action_error) else 0.0
        if verdict is None:
            return Reward(p_action, p_action, 0.0, 0.0, 0.0)
        r_format = 1.0 if verdict.delivered else 0.0
        r_c, r_upc = verdict.fraction(C_CHECKS), verdict.fraction(UPC_CHECKS)
        return Reward(p_action + r_format * (r_c + r_upc), p_action, r_format, r_c, r_upc)

    def metrics(self, verdicts: Sequence[Any]) -> dict[str, Any]:
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
        """The expert through the real EpisodeEnv: look up, take the cheapest distinct places."""
        prompt = self.prompt(visible)
        session = ExpertSession(EpisodeEnv(self.world_for(visible), memory_enabled=prompt.memory))
        query = truth["query"]
        [reply] = session.act(
            "Look up the city's places.", calls=[tool_call("RestaurantLookup", city=query["city"])]
        )
        rows = [json.loads(line) for line in reply.splitlines()]
        if len(rows) < query["days"]:
            raise ExpertFailure("fewer places than days")
        plan = [{"day": d, "restaurant": row["name"]} for d, row in enumerate(rows[: query["days"]], 1)]
        answer = session.answer("The cheapest places, one per day.", plan)
        return {"messages": prompt.messages + session.turns, "tools": prompt.tools, "answer": answer}

    def himap_domain(self, visible: dict[str, Any]) -> Any:
        from tests.tiny_trip.himap import TinyTripDomain

        return TinyTripDomain(visible)

    def himap_expert(self, visible: dict[str, Any], truth: dict[str, Any], knobs: Any = None) -> Any:
        from tests.tiny_trip.himap import TinyTripPolicies

        return TinyTripPolicies(truth)


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
