"""What a run prints around its numbers: the closing table says when episodes
were cut at a length cap and what a tiny model can show, stop reasons print as plain values, the
table is printed below a closed progress bar, library INFO chatter stays quiet, and `--help` keeps
the usage lines' continuations."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from b2tjax.cli.script import QUIET_LOGGERS, setup_logging
from b2tjax.run.metrics import MetricsWriter
from b2tjax.tasks.eval_report import evaluation_header
from b2tjax.tasks.scoring import episode_metrics
from rollout.record import EpisodeRecord, stop_reason_counts
from sandbox.reward import Reward
from sandbox.types import StopReason

ROOT = Path(__file__).resolve().parents[2]


def _records(*reasons: StopReason) -> list[EpisodeRecord]:
    return [EpisodeRecord(instance_id=f"i{k}", stop_reason=r) for k, r in enumerate(reasons)]


def test_stop_reasons_print_as_plain_values_most_common_first():
    records = _records(StopReason.MAX_TURN_TOKENS, StopReason.ANSWER, StopReason.MAX_TURN_TOKENS)
    assert stop_reason_counts(records) == "max_turn_tokens 2, answer 1"


def test_truncated_episodes_and_a_tiny_model_are_flagged():
    records = _records(*[StopReason.MAX_TURN_TOKENS] * 3, StopReason.ANSWER)
    metrics = {"mean_reward": 0.0, "action_error_rate": 0.0}
    text = evaluation_header("b2t evaluation", metrics, records, "rollout.max_turn_tokens=48", 340_000)
    first, truncation, tiny = text.splitlines()
    assert first == (
        "b2t evaluation; mean reward 0.000, action error rate 0.000, truncated 75%, by length 0% "
        "(stop reasons: max_turn_tokens 3, answer 1)"
    )
    assert truncation.startswith("note: 3 of 4 episodes hit a length cap (rollout.max_turn_tokens=48)")
    # true at any action error rate (it said "few action errors" at a rate of 1.000)
    assert truncation.endswith("their reward and action error rate do not say how well they act")
    assert tiny.startswith("note: a 0.34M-parameter model shows that the pipeline runs end to end")


def test_no_notes_when_they_do_not_apply():
    text = evaluation_header("t", {"mean_reward": 0.5}, _records(StopReason.ANSWER), "caps", 8_000_000_000)
    assert text == "t; mean reward 0.500, truncated 0%, by length 0% (stop reasons: answer 1)"


def test_the_share_cut_by_length_is_apart_from_the_turn_count():
    """Episodes cut at rollout.max_seq_len (max_total_tokens) are counted on their own, beside
    the truncated share that also counts the turn count and a turn's cap; logged as a metric too."""
    reasons = [StopReason.MAX_TOTAL_TOKENS, StopReason.MAX_TURNS, StopReason.MAX_TURN_TOKENS]
    reasons.append(StopReason.ANSWER)
    records = [EpisodeRecord(instance_id=f"i{k}", stop_reason=r, episode=k) for k, r in enumerate(reasons)]
    first = evaluation_header("t", {"mean_reward": 0.0}, records, "caps", None).splitlines()[0]
    assert first.startswith("t; mean reward 0.000, truncated 75%, by length 25% (stop reasons: ")
    rewards = [Reward(total=0.0, r_format=0.0, r_c=0.0, r_upc=0.0, p_action=0.0) for _ in records]
    metrics = episode_metrics(records, rewards)
    assert (metrics["truncated_rate"], metrics["length_truncated_rate"]) == (0.75, 0.25)


def test_the_table_prints_below_a_closed_progress_bar(tmp_path, capsys):
    writer = MetricsWriter(tmp_path, total_steps=2, progress=True)
    writer.log(1, {"loss": 1.0})
    writer.end_progress()
    writer.write("TABLE")
    writer.close()
    captured = capsys.readouterr()
    assert captured.out == "TABLE\n"  # printed once, not through the bar
    assert "TABLE" not in captured.err and captured.err.rstrip().endswith("]")  # the bar's last draw


def test_library_info_lines_are_quiet_but_their_warnings_are_not():
    setup_logging()
    for name in ("absl", "jax._src.xla_bridge"):  # Orbax's flag/metrics/store lines; the TPU probe
        assert name in QUIET_LOGGERS
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
        assert logging.getLogger(name).isEnabledFor(logging.WARNING), name


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "launch").glob("*.py")))
def test_help_keeps_usage_continuations(script):
    """A `\\` ending a usage line must reach --help as a backslash and a newline, not join the lines."""
    source = (ROOT / "launch" / script).read_text()
    node = ast.parse(source).body[0]
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        pytest.skip("no module docstring")
    written = ast.get_source_segment(source, node)
    continued = sum(line.endswith("\\") for line in written.splitlines())
    assert node.value.value.count("\\\n") == continued
