"""The Benchmark interface: everything that makes a travel-planning benchmark, in one unit.

A benchmark (Behaviour2Trip, TravelPlanner, ...) owns its data directory, instances and splits,
the world its agent acts in, the agent prompt, the judge, the reward, the metrics table and an
expert planner. Everything else -- the rollout engine, the agent episode, GRPO, the launch
scripts and the notebook -- is generic and reaches the benchmark only through this class.

Conventions shared by every benchmark:
- An instance is a pair `(visible, truth)` of JSON-serialisable dicts. `visible` is what the agent
  may see (it has a string "id"; prompts are built from it alone); `truth` is hidden ground truth
  that only `evaluate` reads. Splits are lists of such pairs in a fixed order.
- `visible.get("difficulty")` names the instance's level ("easy" | "medium" | "hard" where the
  benchmark has levels); training and evaluation filter and interleave by it.
- The world of an instance has `call_tool(name, arguments) -> sandbox.types.ToolResult` (never
  raises) and `tool_schemas() -> list[dict]` (OpenAI-style); `sandbox.EpisodeEnv` drives it.
- The prompt is pure data (`Prompt`: chat messages + tool schemas); rollout/ renders it to token
  ids with models.chat, so this package never imports models or jax.
- A verdict is the benchmark's own result object; it has `delivered: bool` (a readable plan
  shaped like the trip), `all_passed: bool` and `to_dict() -> dict` (JSON for detail files).
- Benchmark-specific settings are keyword options of the constructor (e.g. a tool mode).
- HiMAP is offered through two hooks, `himap_domain` and `himap_expert`; the protocol in
  sandbox/himap knows no benchmark by name.
- A benchmark's code lives in its own folder, sandbox/benchmarks/<name>/, which nothing outside it
  imports: adding one is that folder plus one line in the registry (sandbox/benchmarks/__init__.py).

Pure Python; never imports jax.
"""

from __future__ import annotations

import abc
import argparse
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from sandbox.benchmarks.view import default_view
from sandbox.jsonl import read_jsonl
from sandbox.reward import Reward
from sandbox.types import Prompt, World

if TYPE_CHECKING:  # types only: the HiMAP protocol is loaded by the benchmarks that offer it
    from sandbox.expert_session import ExpertResult
    from sandbox.himap.domain import HimapDomain
    from sandbox.himap.expert import Policies

Log = Callable[[str], None]


class Instance(NamedTuple):
    """One instance of a split as it crosses packages: `visible` (what the agent is given) and
    `truth` (the hidden ground truth), dicts whose schema the benchmark owns; the accessors read
    the keys every benchmark shares. A tuple, so `visible, truth = instance` unpacks it."""

    visible: dict[str, Any]
    truth: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.visible["id"])


def interleave_difficulties(instances: Iterable[Instance]) -> list[Instance]:
    """Instances taken in turn from each difficulty level, each level in file order.

    The first N of the result cover every level, so a short evaluation is not all "easy".
    """
    by_level: dict[str, list[Instance]] = {}
    for inst in instances:
        by_level.setdefault(inst.visible.get("difficulty", "easy"), []).append(inst)
    return [p for row in itertools.zip_longest(*by_level.values()) for p in row if p is not None]


class BenchmarkError(ValueError):
    """A user-facing problem with a benchmark's name, options or data; the message is one line."""


class Verdict(Protocol):
    """A benchmark's judgement of one answer (its own class; these members are what generic code reads)."""

    delivered: bool

    @property
    def all_passed(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


# Counts the tokens of a rendered prompt; rollout passes one built from the run's tokenizer.
TokenCounter = Callable[[Prompt], int]


class Benchmark(abc.ABC):
    """One benchmark over one data directory. Subclasses are registered in sandbox.benchmarks."""

    name: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]  # split names load_split accepts; first = training split
    eval_split: ClassVar[str] = "test"  # what training evaluates on when data.eval_split is unset
    prompt_variants: ClassVar[tuple[str, ...]] = ("tool_agent", "react")  # first = default
    # "b2t": the framework's agent prompt (memory module, tools); "react": plain ReAct baseline.

    def __init__(self, data_dir: str | Path | None, **options: Any) -> None:
        """`data_dir` is what `make_data` wrote; `options` are benchmark-specific settings.
        Unknown options raise BenchmarkError."""
        if options:
            raise BenchmarkError(f"benchmark {self.name!r} takes no option(s) {sorted(options)}")
        self.data_dir = Path(data_dir) if data_dir is not None else None

    # -- command-line options (launch/eval.py, launch/rollouts.py) --------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this benchmark's options (e.g. a tool mode) to the eval and rollout scripts."""
        return  # an optional hook: none by default

    @classmethod
    def options_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        """The constructor's keyword options, from the arguments `add_arguments` added."""
        return {}

    @classmethod
    def check_prompt_variant(cls, variant: str, key: str = "rollout.prompt_style") -> None:
        """BenchmarkError naming `key` unless this benchmark offers `variant`: the scripts check it
        before they load a model, not at the first prompt."""
        if variant not in cls.prompt_variants:
            raise BenchmarkError(f"{key} must be one of {', '.join(cls.prompt_variants)} for {cls.name}")

    @classmethod
    def judge_options(cls, judge: str) -> dict[str, Any]:
        """The constructor's options that make it judge plans as `judge` says (the training config's
        `judge`: "strict", what training rewards, or "official", the harness's published verdicts);
        {} for a benchmark with one way of judging."""
        return {}

    # -- data preparation (launch/make_data.py) ----------------------------------------------------
    @classmethod
    def add_data_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this benchmark's own make_data options (beyond --out, --scale, --seed, --workers)."""
        return  # an optional hook: none by default

    @classmethod
    @abc.abstractmethod
    def make_data(cls, out_dir: Path, args: argparse.Namespace, log: Log) -> dict[str, float] | None:
        """Write the data directory (instances, ground truth, world, SFT traces) from parsed args;
        returns seconds per stage (kept in DATA/build_info.json) or None. `out_dir` may hold an
        interrupted build of the same arguments: a benchmark may keep what it finds finished
        (sandbox.chunked does, for work spread over `args.workers` processes)."""

    @classmethod
    @abc.abstractmethod
    def data_ready(cls, data_dir: Path) -> bool:
        """True when `data_dir` holds what training needs, so make_data can be skipped."""

    @classmethod
    def missing_data(cls, data_dir: Path) -> list[str]:
        """What `data_dir` lacks for training, as paths relative to it (empty when ready); an
        incomplete directory is the user's and is reported, never rebuilt."""
        return [] if cls.data_ready(data_dir) else ["some of the files make_data writes"]

    # -- instances -----------------------------------------------------------------------------
    @abc.abstractmethod
    def load_split(self, split: str) -> list[Instance]:
        """The split's instances in file order; BenchmarkError if it is missing/bad."""

    def load_visible(self, split: str) -> list[dict[str, Any]]:
        """The split's visible instances only: rollouts need no ground truth, which a user may lack."""
        return [visible for visible, _ in self.load_split(split)]

    # -- the agent's world and prompt -----------------------------------------------------------
    @abc.abstractmethod
    def world_for(self, visible: dict[str, Any]) -> World:
        """The tools the agent uses on this instance (may be shared by all instances)."""

    @abc.abstractmethod
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
        """The agent prompt. With `max_tokens` (needs `count_tokens`), compact it to fit;
        BenchmarkError if it cannot fit or `variant` is not in `prompt_variants`. `python`: the
        episodes run the Python tool (sandbox.env), so a benchmark that offers it lists it."""

    # -- judging --------------------------------------------------------------------------------
    @abc.abstractmethod
    def evaluate(self, answer: Any, visible: dict[str, Any], truth: dict[str, Any]) -> Verdict:
        """Judge an answer: the `<answer>` text, an already parsed plan, or None (no answer given,
        which is undelivered). Never raises on a bad answer."""

    @abc.abstractmethod
    def reward(
        self,
        verdict: Verdict | None,
        any_action_error: bool,
        *,
        action_penalty: bool = True,
        format_gate: bool = True,
    ) -> Reward:
        """R = P_action + R_format * (group fractions); `verdict` None = no answer (SPEC section 7).
        Reward.r_c / r_upc hold the benchmark's two constraint-group fractions."""

    @abc.abstractmethod
    def metrics(self, verdicts: Sequence[Verdict]) -> dict[str, Any]:
        """Benchmark metrics over many verdicts; must hold "n", "delivery_rate" and
        "final_pass_rate" (fractions in [0, 1]) plus any breakdowns the table shows."""

    @abc.abstractmethod
    def format_metrics(self, metrics: dict[str, Any]) -> str:
        """`metrics` as the plain-text table launch/eval.py prints."""

    def checks(self, verdict: Verdict) -> list[tuple[str, bool, str]]:
        """(check name, passed, reason) per check of a verdict, in a fixed order, for per-episode
        views (the notebook); an empty list when the benchmark has no such listing."""
        return []

    def episode_view(self, visible: dict[str, Any], answer: Any, verdict: Verdict) -> dict[str, Any]:
        """Plain data the HTML report draws for one judged answer: the request, the plan as day
        timelines (times, places, coordinates) and the checks with the timeline items each failing
        one concerns (format: sandbox.benchmarks.view). Default: the request text and `checks`."""

        return default_view(visible, self.checks(verdict))

    def headline(self, metrics: dict[str, Any]) -> dict[str, float]:
        """The few scalars logged at every training step."""
        return {"final_pass": metrics["final_pass_rate"], "delivery": metrics["delivery_rate"]}

    # -- expert and training data ----------------------------------------------------------------
    @abc.abstractmethod
    def expert_answers(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, str | None]]:
        """(id, answer text) per pair from the expert planner; None where it found no plan."""

    def expert_results(self, pairs: Sequence[Instance]) -> Iterator[tuple[str, ExpertResult | None]]:
        """(id, the expert's whole solve: transcript, replies, answer, plan) per pair, None where
        it does not try; what an episode under a context budget replays (rollout/replay.py)."""
        raise BenchmarkError(f"benchmark {self.name!r} offers no expert transcripts")

    def plan_names(self, plan: Any) -> list[str]:
        """The names and ids of the places and transport a plan uses: what its answer must still
        find in the context it is written from (sandbox.expert_session.unseen)."""
        return []

    def sft_traces(self, limit: int = 0) -> list[dict[str, Any]] | None:
        """Expert chain-of-action traces ({"messages", "tools"}) in DATA/sft/train.jsonl, or None."""
        path = self._path("sft", "train.jsonl")
        if not path.exists():
            return None
        return read_jsonl(path, BenchmarkError, limit)

    # -- HiMAP (sandbox.himap): a benchmark offers it by overriding both hooks -------------------
    @classmethod
    def offers_himap(cls) -> bool:
        """Whether HiMAP can run on this benchmark (it overrides `himap_domain`)."""
        return cls.himap_domain is not Benchmark.himap_domain

    def himap_domain(self, visible: dict[str, Any]) -> HimapDomain:
        """The HiMAP domain (task tuple, day slots, Σ pricing) of one visible instance."""
        raise BenchmarkError(f"HiMAP has no domain for benchmark {self.name!r}")

    def himap_expert(self, visible: dict[str, Any], truth: dict[str, Any], knobs: Any = None) -> Policies:
        """The scripted HiMAP team's role policies for one instance (see sandbox.himap.expert.drive);
        `knobs` are the benchmark's own expert settings."""
        raise BenchmarkError(f"HiMAP has no scripted expert for benchmark {self.name!r}")

    def tokenizer_corpus(self) -> list[str]:
        """Text a small SentencePiece tokenizer is trained on: train prompts and expert traces."""
        prompts = [self.prompt(visible) for visible, _ in self.load_split(self.splits[0])]
        texts = [json.dumps(prompts[0].tools or [])] if prompts else []
        texts += [m["content"] for prompt in prompts for m in prompt.messages]
        texts += [m["content"] for trace in self.sft_traces() or [] for m in trace["messages"]]
        return texts

    def _path(self, *parts: str) -> Path:
        if self.data_dir is None:
            raise BenchmarkError(f"benchmark {self.name!r} was opened without a data directory")
        return self.data_dir.joinpath(*parts)
