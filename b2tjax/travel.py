"""The travel-planning task behind the trainer's Task protocol: data, tokenizer, rollouts, reward, evaluation.

`TravelTask.prepare(cfg)` makes a fresh machine ready: it builds DATA with launch/make_data.py when
absent, trains the SentencePiece tokenizer of the tiny recipe on the generated corpus (or loads the
Qwen3 / a checkpoint tokenizer), and opens the world. Rollouts run through the RolloutEngine;
rewards are `rollout.scoring.score_records`: `sandbox.compute_reward` of `sandbox.evaluate_plan`
(action penalty and format gate switchable for the ablations).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from flax import nnx

from b2tjax.cli import UserError, open_world
from b2tjax.config import TrainConfig
from b2tjax.data import read_jsonl
from b2tjax.prepare import ensure_data
from b2tjax.sft import sft_examples
from sandbox.instances.loader import interleave_difficulties
from b2tjax.trainer import RolloutBatch

def _corpus(data_dir: Path, tool_schemas: Sequence[dict]) -> list[str]:
    """Text the tiny tokenizer is trained on: expert traces, instances and the tool schemas."""
    texts = [json.dumps(tool_schemas)]
    sft = data_dir / "sft" / "train.jsonl"
    if sft.exists():
        texts += [m["content"] for trace in read_jsonl(sft) for m in trace["messages"]]
    for inst in read_jsonl(data_dir / "instances" / "train.jsonl"):
        texts.append(inst["instruction"])
        texts += [json.dumps(e, ensure_ascii=False) for e in inst.get("trajectory", [])]
    return texts


def load_or_train_tokenizer(cfg: TrainConfig, data_dir: Path, tool_schemas: Sequence[dict]) -> Any:
    """The run's tokenizer: `cfg.model.tokenizer`, or for "sentencepiece" the tiny recipe's model in
    DATA/tokenizer/, trained once on the corpus so later runs and resumes reuse the same ids."""
    from models.tokenizer import load_tokenizer

    spec = cfg.model.tokenizer
    if spec != "sentencepiece":
        return load_tokenizer(spec)
    path = data_dir / "tokenizer" / f"sp{cfg.model.sp_vocab_size}.model"
    if not path.exists():
        from models.spm import train_sentencepiece

        print(f"training a {cfg.model.sp_vocab_size}-piece SentencePiece tokenizer on the corpus ...", flush=True)
        train_sentencepiece(_corpus(data_dir, tool_schemas), path.with_suffix(""), vocab_size=cfg.model.sp_vocab_size)
    return load_tokenizer(path)


class TravelTask:
    """The trainer's Task for Behavior2Trip: instances as prompts, sandbox rollouts, evaluator rewards."""

    def __init__(self, cfg: TrainConfig, data_dir: Path, world: Any, tokenizer: Any):
        self.cfg = cfg
        self.data_dir = data_dir
        self.world = world
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self._train = self._load_split(cfg.data.train_split, cfg.data.max_train_instances)
        self._eval = self._load_split(cfg.data.eval_split, cfg.data.eval_instances)
        self._check_prompt_budget()
        self._engine = None
        self._python_pool = None

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> "TravelTask":
        data_dir = Path(cfg.data.data_dir)
        ensure_data(data_dir, cfg.data.world_scale)
        world = open_world(data_dir / "world.sqlite")
        tokenizer = load_or_train_tokenizer(cfg, data_dir, world.tool_schemas())
        return cls(cfg, data_dir, world, tokenizer)

    def _load_split(self, split: str, limit: int) -> list[tuple[dict, dict]]:
        path = self.data_dir / "instances" / f"{split}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"no {path}; build the data with launch/make_data.py --out {self.data_dir}")
        truth_path = self.data_dir / "ground_truth" / f"{split}.jsonl"
        truth = {g["id"]: g for g in read_jsonl(truth_path)}
        instances = read_jsonl(path)
        missing = [inst["id"] for inst in instances if inst["id"] not in truth]
        if missing:  # the evaluator could not score them: never train or evaluate on a silent subset
            raise UserError(f"{truth_path} has no ground truth for {len(missing)} instance(s) of {path}: "
                            + ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else ""))
        wanted = set(self.cfg.data.difficulties)
        pairs = [(inst, truth[inst["id"]]) for inst in instances if inst.get("difficulty", "easy") in wanted]
        return interleave_difficulties(pairs)[:limit] if limit else pairs

    def _check_prompt_budget(self) -> None:
        """At start-up, not after SFT: even without its trajectory, the instance with the longest
        instruction must fit rollout.max_prompt_tokens with the system prompt and tool schemas."""
        from rollout.prompt import build_prompt

        r = self.cfg.rollout
        budget = r.max_prompt_tokens or r.max_seq_len // 2
        instances = [inst for inst, _ in self._train + self._eval]
        if not instances:
            return
        longest = max(instances, key=lambda inst: len(inst.get("instruction", "")))
        bare = build_prompt({**longest, "trajectory": []}, self.world.tool_schemas(), memory=r.memory_enabled,
                            variant=r.prompt_style)
        needed = len(bare.ids(self.tokenizer))
        if needed > budget:
            raise UserError(f"rollout.max_prompt_tokens={budget} is too small: the system prompt, tool "
                            f"schemas and instruction of {longest['id']!r} alone take {needed} tokens")

    # -- Task protocol --------------------------------------------------------------------------
    def train_examples(self) -> Sequence[Any]:
        return self._train

    def sft_examples(self) -> list[dict] | None:
        path = self.data_dir / "sft" / "train.jsonl"
        if not path.exists():
            return None
        traces = read_jsonl(path, self.cfg.sft.max_examples)
        return sft_examples(traces, self.tokenizer, self.cfg.sft.max_seq_len, self.world.tool_schemas())

    def _engine_for(self, model: nnx.Module, rows: int, temperature: float):
        from rollout.engine import RolloutConfig, RolloutEngine

        r = self.cfg.rollout
        config = RolloutConfig(batch_size=rows, max_turns=r.max_turns, max_turn_tokens=r.max_new_tokens,
                               max_total_tokens=r.max_seq_len, temperature=temperature, top_p=r.top_p,
                               cache_dtype=self.cfg.model.compute_dtype)
        return RolloutEngine(model, self.tokenizer, config)

    def _episodes(self, pairs: Sequence[tuple[dict, dict]]):
        from rollout.episodes import agent_episode

        r = self.cfg.rollout
        return [agent_episode(inst, self.world, self.tokenizer, max_turns=r.max_turns,
                              max_prompt_tokens=r.max_prompt_tokens or r.max_seq_len // 2, memory=r.memory_enabled,
                              variant=r.prompt_style, python_tool=self._python_tool())
                for inst, _ in pairs]

    def _python_tool(self):
        if not self.cfg.rollout.python_tool:
            return None
        if self._python_pool is None:
            from sandbox.python_tool import PythonSandbox

            self._python_pool = PythonSandbox()
        return self._python_pool

    def _score(self, records, pairs) -> tuple[list, list]:
        from rollout.scoring import score_records

        g = self.cfg.grpo
        return score_records(records, pairs, self.world, action_penalty=g.action_penalty, format_gate=g.format_gate)

    def rollout(self, model: nnx.Module, prompts: list[Any], group_size: int, seed: int,
                should_stop: Callable[[], bool] | None = None) -> RolloutBatch:
        from sandbox.metrics import compute_metrics

        pairs = [p for p in prompts for _ in range(group_size)]
        if self._engine is None:
            self._engine = self._engine_for(model, len(pairs), self.cfg.rollout.temperature)
        else:
            self._engine.update_weights(model)
        records = self._engine.run(self._episodes(pairs), seed, should_stop=should_stop)
        evals, rewards = self._score(records, pairs)
        summary = compute_metrics(evals)
        metrics = {
            "final_pass": summary["final_pass_rate"], "delivery": summary["delivery_rate"],
            "micro_pass_c": summary["c_micro"], "micro_pass_upc": summary["upc_micro"],
            "r_format": float(np.mean([r.r_format for r in rewards])),
            "p_action": float(np.mean([r.p_action for r in rewards])),
            "action_error_rate": float(np.mean([rec.any_error for rec in records])),
            "truncated_rate": float(np.mean([rec.truncated for rec in records])),
            "turns": float(np.mean([len(rec.turns) for rec in records])),
        }
        return RolloutBatch(records, metrics)

    def evaluate(self, model: nnx.Module) -> tuple[dict, str]:
        from sandbox.metrics import compute_metrics, format_table

        engine = self._engine_for(model, max(1, min(len(self._eval), 16)), temperature=0.0)  # greedy
        records = engine.run(self._episodes(self._eval), 0)
        evals, rewards = self._score(records, self._eval)
        metrics = compute_metrics(evals)
        metrics["mean_reward"] = float(np.mean([x.total for x in rewards])) if rewards else 0.0
        r = self.cfg.rollout
        header = (f"evaluation on {len(self._eval)} {self.cfg.data.eval_split} instances "
                  f"(greedy, prompt {r.prompt_style}, memory {r.memory_enabled and r.prompt_style == 'b2t'}); "
                  f"mean reward {metrics['mean_reward']:.3f}")
        return metrics, header + "\n" + format_table(metrics)
