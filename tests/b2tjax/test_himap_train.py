"""HiMAP in the trainer: the `himap:` config section is validated, and one GRPO step trains on HiMAP
episodes with different numbers of streams (the tiny recipe, a tiny random model, 1 prompt x 2).

Episode 0 replays the scripted HiMAP expert in short: its coordinator's distribute_task and each
day executor's submit_day, teacher-forced, so it delivers the expert's plan; episode 1 is sampled
by the random model (a coordinator that never distributes: one stream). The rewards, the episode
and group ids, the local rewards and the parameter update are checked against the benchmark's own
verdicts computed here.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

from b2tjax.config import load_config
from tests.rollout_fixtures import rollout_setup  # noqa: F401  (session fixture)
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)

pytestmark = pytest.mark.slow  # trains HiMAP teams

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "himap_tiny_cpu.yaml"


@pytest.mark.parametrize(
    "override, expected",
    [
        ("himap.max_rounds=0", "himap.max_rounds must be >= 1, got 0"),
        (
            "himap.executor_limits.max_turns=0",
            "himap.executor_limits.max_turns must be in [1, rollout.max_turns=4]",
        ),
        ("himap.coordinator_limits.max_turns=5", "himap.coordinator_limits.max_turns must be in [1, rollout"),
        (
            "himap.coordinator_limits.max_turn_tokens=49",
            "himap.coordinator_limits.max_turn_tokens must be in [1, rollout.max_turn_tokens=48]",
        ),
        (
            "himap.executor_limits.max_seq_len=9999",  # the old key name still loads
            "himap.executor_limits.max_total_tokens must be in [1, rollout.max_seq_len=5120]",
        ),
        (
            "himap.parallel=maybe",
            "himap.parallel: expected true/false (a boolean, not a string or number), got 'maybe'",
        ),
        ("himap.rounds=2", "unknown config key 'himap.rounds'"),
        ("agent=team", "agent must be one of single, himap; got 'team'"),
        ("benchmark=toy_bench", "unknown benchmark"),
    ],
)
def test_the_himap_section_is_validated_with_one_line_per_mistake(override, expected):
    with pytest.raises(ValueError) as info:
        load_config(RECIPE, [override])
    assert expected in str(info.value)


def test_himap_needs_a_travel_task_and_maps_to_the_protocol_options():
    with pytest.raises(ValueError, match="agent: himap needs task: travel"):
        load_config(RECIPE, ["task=toy"])
    cfg = load_config(RECIPE, ["himap.coordinator=true", "himap.executor_limits.max_turn_tokens=32"])
    options = cfg.himap  # the config's section is the protocol's HimapOptions
    assert options.coordinator and options.max_rounds == 2
    assert (options.executor_limits.max_turns, options.executor_limits.max_turn_tokens) == (2, 32)
    assert options.coordinator_limits.max_total_tokens is None  # the recipe's 0 = the rollout section's


def _two_day(visible, truth):
    """The instance as a 2-day trip with a short behaviour log (two executors and a short
    coordinator prompt keep the step small)."""
    from sandbox.benchmarks.b2t.instances.instructions import make_instruction

    visible, truth = copy.deepcopy(visible), copy.deepcopy(truth)
    truth["query"]["days"] = 2
    visible["trajectory"] = visible["trajectory"][:8]
    visible["instruction"] = make_instruction(random.Random(0), truth["query"], {}, "en")
    return visible, truth


def test_one_grpo_step_over_himap_episodes_with_different_stream_counts(
    tmp_path,
    rollout_setup,  # noqa: F811
    small_benchmark,  # noqa: F811
):
    """LoRA adapters on the frozen model, the sampler applying them to every stream of the team.

    One variant (~5 CPU-min of train step on 2 cores): the team's records, rewards and advantages do
    not depend on the adapters, and the full fine-tuning update of the same records is the single-agent
    one (tests/b2tjax/test_grpo_step.py); LoRA adds what only HiMAP has, adapters under multi-stream
    sampling."""
    from b2tjax.run.task_build import himap_options, task_spec
    from b2tjax.run.trainer import Trainer
    from b2tjax.tasks.benchmark import BenchmarkTask
    from b2tjax.tasks.himap import HimapTeam
    from rollout.agents.himap import himap_episode
    from sandbox.benchmarks.b2t.benchmark import B2TBenchmark
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve

    cfg = load_config(
        RECIPE,
        [
            f"out={tmp_path / 'run'}",
            f"data.data_dir={small_benchmark}",
            "mode=grpo",
            "steps=1",
            "eval_at_end=false",
            "checkpoint.async_save=false",
            "himap.coordinator=true",
            "himap.bargaining=false",
            "rollout.max_seq_len=8192",
            "rollout.batch_rows=3",
            "rollout.max_turn_tokens=8",
            "rollout.prefill_chunk=1024",
            "rollout.prefill_min_bucket=1024",  # one prefill width: one compile
            "model.lora.rank=4",
        ],
    )
    bench = B2TBenchmark(small_benchmark)
    pair = _two_day(*bench.load_split("test")[0])
    expert = solve(bench, *pair, HimapOptions(bargaining=False))
    # the expert's last turn per stream: the coordinator's distribute_task, each day's submit_day
    shortcut = {stream: texts[-1:] for stream, texts in expert.texts.items()}

    class Forced(HimapTeam):
        """The first episode of a group teacher-forced to the expert's short cut; keeps its batch."""

        batch = None

        def episodes(self, pairs):
            return [
                himap_episode(
                    v, self.benchmark, self.tokenizer, self.options, forced=shortcut if i == 0 else None
                )
                for i, (v, _) in enumerate(pairs)
            ]

        def batch(self, scored, metrics, group_size):
            self.kept = super().batch(scored, metrics, group_size)
            return self.kept

    spec = task_spec(cfg)
    team = Forced(bench, rollout_setup.tokenizer, himap_options(cfg), spec.rollout, spec.reward, spec.sft)
    task = BenchmarkTask(spec, bench, rollout_setup.tokenizer, team)
    task.splits.train = [pair]  # one prompt
    from flax import nnx

    from models.lora import add_lora

    model = add_lora(nnx.clone(rollout_setup.model), cfg.model.lora)
    result = Trainer(cfg, task, model, progress=False).run()

    batch = team.kept
    streams = [[r.stream for r in batch.records if r.episode == e] for e in (0, 1)]
    assert streams == [["coordinator", "day1.r1", "day2.r1"], ["coordinator"]]
    assert batch.groups == [0, 0, 0, 0] and batch.episodes == [0, 0, 0, 1]
    assert batch.local_rewards == [None, 1.0, 1.0, None]  # both forced days accepted
    # team rewards = the benchmark's reward of each episode's merged answer, judged here
    verdict = bench.evaluate(expert.answer, *pair)
    assert verdict.all_passed
    forced = bench.reward(verdict, False).total
    assert [r.reward for r in batch.records[:3]] == [forced] * 3
    sampled = batch.records[3]
    lone = bench.reward(bench.evaluate(sampled.answer, *pair), sampled.any_error).total
    assert sampled.reward == lone < forced
    m = result.last_metrics
    assert (m["records"], m["episodes"], m["rounds"], m["streams"]) == (4, 2, 0.5, 2.0)
    # episode 0's streams get +a, episode 1's coordinator -a (a group of two team rewards)
    assert m["adv_mean/executor"] > 0.9 and m["adv_mean/coordinator"] == pytest.approx(0.0, abs=1e-6)
    assert batch.records[0].answer == expert.answer  # the forced team merged the expert's plan
    # only episode 1's coordinator sampled tokens (mask 1), with a negative advantage: a real update
    assert sum(r.num_sampled for r in batch.records[:3]) == 0 and sampled.num_sampled > 0
    assert m["grad_norm"] > 0 and m["applied"] == 1.0


def test_launch_eval_scores_the_scripted_himap_team(tmp_path, small_benchmark):  # noqa: F811
    """`launch/eval.py --policy expert --agent himap`: every plan delivered, and as many passed as the
    single-agent expert's on the same instances (the benchmark's verdicts, computed here)."""
    import json

    from launch.eval import main
    from sandbox.benchmarks.b2t.benchmark import B2TBenchmark

    out = tmp_path / "himap.json"
    argv = ["--data", str(small_benchmark), "--split", "test", "--difficulty", "easy", "--json", str(out)]
    assert main([*argv, "--policy", "expert", "--agent", "himap"]) == 0
    metrics = json.loads(out.read_text())
    bench = B2TBenchmark(small_benchmark)
    pairs = [p for p in bench.load_split("test") if p[0]["difficulty"] == "easy"]
    single = [bench.evaluate(answer, *pair) for (_, answer), pair in zip(bench.expert_answers(pairs), pairs)]
    assert metrics["n"] == len(pairs) > 0 and metrics["delivery_rate"] == 1.0
    assert metrics["final_pass_rate"] >= sum(v.all_passed for v in single) / len(pairs)
    assert len(metrics["himap"]) == len(pairs) and all(m["rounds"] >= 1 for m in metrics["himap"])


def test_launch_eval_himap_needs_a_checkpoint_one_line(tmp_path, capsys):
    from launch.eval import main

    with pytest.raises(SystemExit) as stop:
        main(["--data", str(tmp_path), "--policy", "model", "--agent", "himap"])
    assert stop.value.code == 2
    assert "--policy model needs --checkpoint DIR" in capsys.readouterr().err


def test_the_himap_warm_start_imitates_only_plans_that_pass_every_check(
    tmp_path,
    rollout_setup,  # noqa: F811
    small_benchmark,  # noqa: F811
):
    """The HiMAP task's sft_examples (what training uses) keeps the traces of instances whose merged plan
    passes; a delivered plan that fails a check (here: the budget, cut to 1) teaches nothing, and
    instances on which no plan passes give no warm start (the tiny recipe's flat team, on the
    instance with the budget cut)."""
    from b2tjax.run.task_build import benchmark_task
    from b2tjax.sft.traces import sft_examples
    from sandbox.benchmarks.b2t import B2TBenchmark
    from sandbox.himap.scripted import solve

    # the full team, with tool replies long enough for the expert to read (the recipe's 1,200
    # characters cut them, and its flat team splits the budget equally: few of its plans pass)
    # (10240: the coordinator's prompt also lists the executors' search tools, for its fallback)
    full = ["rollout.max_seq_len=10240", "rollout.max_response_chars=6000", "himap.coordinator=true"]
    cfg = load_config(RECIPE, [f"data.data_dir={small_benchmark}", *full])
    bench = B2TBenchmark(small_benchmark)
    good = bench.load_split("train")[:2]
    visible, truth = good[0]
    broke = copy.deepcopy(truth)
    broke["query"]["budget"] = 1
    spoiled = solve(bench, visible, broke)
    assert spoiled.answer is not None  # delivered, yet over budget:
    assert not bench.evaluate(spoiled.answer, visible, broke).all_passed
    assert all(bench.evaluate(solve(bench, *pair).answer, *pair).all_passed for pair in good)
    task = benchmark_task(cfg, bench, rollout_setup.tokenizer)
    task.splits.train = [good[0], (visible, broke), good[1]]  # the instances the warm start reads
    expected = [trace for pair in good for trace in solve(bench, *pair).traces]
    want = sft_examples(expected, rollout_setup.tokenizer, cfg.sft.max_seq_len)
    assert [example["ids"] for example in task.sft_examples()] == [example["ids"] for example in want]

    flat = benchmark_task(
        load_config(RECIPE, [f"data.data_dir={small_benchmark}", full[0]]), bench, task.tokenizer
    )
    flat.splits.train = [(visible, broke)]
    assert flat.sft_examples() is None
