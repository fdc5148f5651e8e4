"""The consolidation's counts only go down: a new structural knob, a new reader of the whole
training config, a new collective outside the orchestrator or a new upward import fails here
(tests/project/code_counts.py prints them; docs/ARCHITECTURE.md quotes the table)."""

from __future__ import annotations

from tests.project import code_counts

CEILINGS = {
    "structural knobs": 6,
    "modules importing TrainConfig outside the config readers": 0,
    "cross-process calls in b2tjax/ outside the orchestrator": 0,
    "upward imports inside b2tjax/": 0,
}


def test_the_counts_stay_at_or_under_their_ceilings():
    counts = code_counts.counts()
    over = {name: counts[name] for name, ceiling in CEILINGS.items() if len(counts[name]) > ceiling}
    assert not over, over


def test_the_counter_sees_a_config_reader_and_a_collective(tmp_path, monkeypatch):
    (tmp_path / "b2tjax" / "grpo").mkdir(parents=True)
    (tmp_path / "b2tjax" / "grpo" / "x.py").write_text(
        "from b2tjax.config import TrainConfig\nfrom b2tjax.run import mesh\n\n\ndef f():\n    agree([1])\n"
    )
    monkeypatch.setattr(code_counts, "ROOT", tmp_path)
    assert code_counts.config_importers() == ["b2tjax/grpo/x.py"]
    assert code_counts.collective_calls("b2tjax") == ["b2tjax/grpo/x.py:6 agree"]
    assert code_counts.upward_imports() == ["grpo -> run"]
