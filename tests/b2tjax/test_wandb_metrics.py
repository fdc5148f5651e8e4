"""Optional Weights & Biases logging: `metrics.wandb: true` logs every step's
scalars to a W&B run named by `metrics.wandb_project` / `metrics.wandb_run`; off by default, and
never a dependency: wandb is imported only when on, and a run that asks for it without the
package stops in one line saying how to get it.

The W&B service cannot be reached from CI, so the logging test runs the real wandb package in its
offline mode (WANDB_MODE=offline) and reads back the run file it writes with wandb's own protobuf
records; it is skipped where wandb is not installed (it is no dependency of ours)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from b2tjax.config import load_config
from b2tjax.errors import UserError
from b2tjax.run.metrics import MetricsWriter, import_wandb, wandb_run

ROOT = Path(__file__).resolve().parents[2]
BLOCK, HEADER = 32768, 7  # the LevelDB log layout of a .wandb file: 32 KiB blocks, 7-byte record headers


def _records(path: Path) -> list[bytes]:
    """The records of a .wandb file: after its 7-byte ':W&B' header, LevelDB log records (4-byte
    checksum, 2-byte length, 1-byte type: 1 full, 2 first, 3 middle, 4 last), blocks padded."""
    data, out, part, pos = path.read_bytes(), [], b"", 7
    assert data[:4] == b":W&B"
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0 and length == 0:
            break
        part += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (1, 4):
            out.append(part)
            part = b""
    return out


@pytest.mark.slow
def test_default_config_logs_nowhere_and_never_imports_wandb(tmp_path):
    cfg = load_config(ROOT / "configs" / "toy.yaml")
    assert cfg.metrics.wandb is False and wandb_run(cfg) is None
    code = (
        "import sys; from b2tjax.run.metrics import MetricsWriter; "
        f"w = MetricsWriter({str(tmp_path)!r}, total_steps=1, progress=False); w.log(1, {{'loss': 1.0}}); "
        "w.close(); print('wandb' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_asking_for_wandb_without_the_package_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # how Python spells "not installed" to an import
    with pytest.raises(UserError, match=r"metrics.wandb: true needs the wandb package: pip install wandb"):
        import_wandb()


def test_offline_wandb_run_holds_each_steps_scalars(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2 as pb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run1"
    cfg = load_config(
        ROOT / "configs" / "toy.yaml", [f"out={out}", "metrics.wandb=true", "metrics.wandb_project=trips"]
    )
    writer = MetricsWriter(out, total_steps=2, progress=False, wandb=wandb_run(cfg))
    writer.log(1, {"loss": 0.5, "reward": 0.25}, phase="grpo")
    writer.log(2, {"loss": 0.375, "reward": 0.5}, phase="grpo")
    writer.close()

    (run_file,) = (out / "wandb").glob("offline-run-*/run-*.wandb")
    history, runs = {}, []
    for data in _records(run_file):
        record = pb.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            items = {
                item.key or "/".join(item.nested_key): json.loads(item.value_json)
                for item in record.history.item
            }
            scalars = {k: v for k, v in items.items() if not k.startswith("_")}  # not W&B's own
            history.setdefault(record.history.step.num, {}).update(scalars)
        elif record.WhichOneof("record_type") == "run":
            runs.append(record.run)
    assert history == {
        1: {"grpo/loss": 0.5, "grpo/reward": 0.25},
        2: {"grpo/loss": 0.375, "grpo/reward": 0.5},
    }
    assert (runs[0].project, runs[0].display_name) == ("trips", "run1")  # the run directory's name
    assert runs[0].run_id == (out / "wandb_id").read_text().strip()  # a resume logs to the same run
