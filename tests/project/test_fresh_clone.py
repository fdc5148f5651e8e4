"""A clone is the whole product: the repository's HEAD commit, cloned alone into an empty
directory (no ../shared, no sibling folders), builds the TravelPlanner data and scores the expert on
it from what the clone itself holds; and takes a user's own Qwen3 checkpoint from
import to a Hugging Face export whose `generate` stops at <|im_end|>. Real git, real launch
scripts in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # clones, installs and runs the project

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """HEAD of the repository these tests run in, cloned into an otherwise empty directory."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        head = _git("rev-parse", "HEAD", cwd=ROOT).strip()
    except subprocess.CalledProcessError:
        pytest.skip(f"{ROOT} is not a git checkout")
    parent = tmp_path_factory.mktemp("fresh")
    dest = parent / "b2tjax"
    _git("clone", "--quiet", "--no-checkout", str(ROOT), str(dest), cwd=parent)
    _git("fetch", "--quiet", str(ROOT), head, cwd=dest)  # HEAD may be detached (CI) or unpushed
    _git("checkout", "--quiet", head, cwd=dest)
    assert list(parent.iterdir()) == [dest]  # nothing beside the clone: no ../shared
    return dest


def _run(clone: Path, *argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(clone), JAX_PLATFORMS="cpu")  # the clone's code wins
    return subprocess.run(
        [sys.executable, *argv], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_travelplanner_data_and_expert_evaluation_from_a_fresh_clone(clone):
    where = _run(clone, "-c", "import sandbox, b2tjax; print(sandbox.__file__, b2tjax.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(Path(p).is_relative_to(clone) for p in where.stdout.split()), where.stdout

    built = _run(clone, "launch/make_data.py", "--benchmark", "travelplanner", "--out", "data/tp")
    assert built.returncode == 0, built.stderr[-2000:]
    shipped = clone / "sandbox" / "benchmarks" / "travelplanner" / "data" / "database"
    for table in ("clean_accommodations_2022.csv", "attractions.csv", "distance.csv"):
        assert (clone / "data" / "tp" / "database" / table).read_bytes() == (shipped / table).read_bytes()

    # no --benchmark: data/tp says it holds TravelPlanner data
    argv = ["--data", "data/tp", "--policy", "expert", "--split", "train", "--json", "m.json"]
    scored = _run(clone, "launch/eval.py", *argv)
    assert scored.returncode == 0, scored.stderr[-2000:]
    metrics = json.loads((clone / "m.json").read_text())
    assert metrics["n"] >= 45 and metrics["final_pass_rate"] == 1.0  # the 45 official + generated


# The smallest run of every stage: one SFT step, one GRPO step of two one-turn episodes, one eval instance.
TINY_RUN = (
    "sft.steps=1",
    "sft.batch_size=1",
    "sft.max_seq_len=256",
    "steps=1",
    "rollout.group_size=2",
    "rollout.batch_rows=2",
    "rollout.max_turns=1",
    "rollout.max_turn_tokens=8",
    "grpo.mini_batches=1",
    "data.eval_instances=1",
    "model.lora.rank=4",
    "model.lora.alpha=8",
    "model.lora.targets=[q_proj, v_proj]",
    "checkpoint.async_save=false",
)
IM_END = 151645


def _tiny_qwen3(directory: Path) -> Path:
    """A random Qwen3 of Qwen3's vocabulary, saved by transformers, with Qwen3's tokenizer files."""
    transformers = pytest.importorskip("transformers")
    from models.tokenizer import load_tokenizer

    config = transformers.Qwen3Config(
        vocab_size=151936,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151645,
    )
    transformers.Qwen3ForCausalLM(config).save_pretrained(directory)
    load_tokenizer("qwen3").save_hf(directory)
    return directory


@pytest.mark.slow  # a whole LoRA run on a 151,936-row vocabulary, in subprocesses
def test_own_qwen3_checkpoint_from_import_to_an_export_that_stops(clone, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = _tiny_qwen3(tmp_path / "my-qwen3")

    imported = _run(clone, "launch/import_hf.py", "--hf", str(hf), "--out", "ckpt")
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert (clone / "ckpt" / "tokenizer.json").read_bytes() == (hf / "tokenizer.json").read_bytes()

    argv = ["--init", f"hf:{hf}", "--out", "runs/mine", "--no-progress", *TINY_RUN]
    trained = _run(clone, "launch/train.py", *argv, timeout=1500)
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-3000:]
    assert f"tokenizer: {hf} (the one model.init=hf:{hf} comes with)" in trained.stdout
    assert "vocab 151936" in trained.stdout and "done: 2 steps" in trained.stdout
    assert (clone / "runs" / "mine" / "eval.json").is_file()

    ckpt = "runs/mine/checkpoints"
    rollout = ["--checkpoint", ckpt, "--data", "data/small", "--num", "1", "--out", "r.jsonl"]
    rolled = _run(clone, "launch/rollouts.py", *rollout, "--max-turns", "1", "--max-turn-tokens", "8")
    assert rolled.returncode == 0, rolled.stderr[-3000:]
    (record,) = [json.loads(line) for line in (clone / "r.jsonl").read_text().splitlines()]
    assert record["ids"] and record["stop_reason"]
    scored = _run(clone, "launch/eval.py", "--data", "data/small", "--records", "r.jsonl", "--split", "test")
    assert scored.returncode == 0, scored.stderr[-3000:]

    exported = _run(clone, "launch/export_hf.py", "--checkpoint", ckpt, "--out", "merged")
    assert exported.returncode == 0, exported.stderr[-3000:]
    merged = clone / "merged"
    generation = json.loads((merged / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [IM_END, 151643] and generation["pad_token_id"] == 151643
    model = transformers.AutoModelForCausalLM.from_pretrained(merged, torch_dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(merged)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == IM_END  # the checkpoint's own tokenizer
    prompt = tokenizer("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", return_tensors="pt")
    with torch.no_grad():  # the bias makes <|im_end|> the likeliest token, as a chat model's turn end
        out = model.generate(**prompt, do_sample=False, max_new_tokens=6, sequence_bias={(IM_END,): 100.0})
    assert out[0, prompt["input_ids"].shape[1] :].tolist() == [IM_END]
