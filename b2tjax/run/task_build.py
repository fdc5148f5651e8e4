"""The run's benchmark Task, built once from the TrainConfig: the reader that turns the config into
the small specs a task reads (b2tjax.tasks.spec), picks the agent architecture (`agent:`) and
opens the data, the tokenizer and the benchmark.

The tokenizer of the tiny recipe is trained here by process 0 while the others wait, the one
cross-process step of building a task.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
from jax.experimental import multihost_utils

from b2tjax.config import TrainConfig
from b2tjax.data.marker import check_data_dir
from b2tjax.run.mesh import rollout_mesh
from b2tjax.tasks.base import Agent
from b2tjax.tasks.benchmark import BenchmarkTask
from b2tjax.tasks.himap import HimapTeam
from b2tjax.tasks.single import SingleAgent
from b2tjax.tasks.spec import DataSpec, RewardSpec, SftSpec, TaskSpec
from models.spm import train_sentencepiece
from models.tokenizer import load_tokenizer
from sandbox.benchmarks import Benchmark, benchmark_class, get_benchmark
from sandbox.himap.options import HimapOptions


def task_spec(cfg: TrainConfig) -> TaskSpec:
    """What a benchmark task reads of `cfg` (a copy of its `rollout:` section: the task never sees
    later changes to the config)."""
    d = cfg.data
    return TaskSpec(
        DataSpec(d.train_split, d.max_train_instances, d.eval_split, d.eval_instances, tuple(d.difficulties)),
        dataclasses.replace(cfg.rollout),
        RewardSpec(cfg.grpo.action_penalty, cfg.grpo.format_gate),
        SftSpec(cfg.sft.max_examples, cfg.sft.max_seq_len),
        rollout_mesh(cfg.mesh),
    )


def himap_options(cfg: TrainConfig) -> HimapOptions:
    """The recipe's HiMAP switches, with the rollout's cap on environment replies."""
    return dataclasses.replace(cfg.himap, max_response_chars=cfg.rollout.max_response_chars)


def benchmark_task(cfg: TrainConfig, benchmark: Benchmark, tokenizer: Any) -> BenchmarkTask:
    """The Task of `cfg.agent` on an open benchmark."""
    spec = task_spec(cfg)
    agent: Agent
    if cfg.agent == "himap":
        agent = HimapTeam(benchmark, tokenizer, himap_options(cfg), spec.rollout, spec.reward, spec.sft)
    else:
        agent = SingleAgent(benchmark, tokenizer, spec.rollout, spec.reward, spec.sft)
    return BenchmarkTask(spec, benchmark, tokenizer, agent)


def build_task(cfg: TrainConfig) -> BenchmarkTask:
    """The run's Task: a built DATA (launch/train.py builds it first when absent; here only checked),
    its tokenizer and the benchmark `cfg.benchmark` with the recipe's judge."""
    data_dir = Path(cfg.data.data_dir)
    check_data_dir(data_dir, cfg.benchmark)
    judge = benchmark_class(cfg.benchmark).judge_options(cfg.judge)
    benchmark = get_benchmark(cfg.benchmark, data_dir, **judge)
    return benchmark_task(cfg, benchmark, load_or_train_tokenizer(cfg, data_dir, benchmark))


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
