"""SFT on the expert chain-of-action traces: the encoding masks exactly the assistant turns, and
training a random tiny model on them lowers the loss steadily."""

import json

import numpy as np
import pytest

from b2tjax.config import load_config
from b2tjax.run.metrics import read_metrics
from b2tjax.run.trainer import Trainer, build_model
from b2tjax.sft.traces import encode_trace, sft_examples, windows
from tests.sandbox.test_instances import small_benchmark  # noqa: F401
from tests.sandbox_fixtures import small_world_path  # noqa: F401


@pytest.fixture(scope="module")
def traces_and_tokenizer(small_benchmark, tmp_path_factory):  # noqa: F811
    from models.spm import train_sentencepiece
    from models.tokenizer import load_tokenizer

    traces = [json.loads(line) for line in (small_benchmark / "sft" / "train.jsonl").read_text().splitlines()]
    texts = [m["content"] for t in traces for m in t["messages"]] + [json.dumps(traces[0]["tools"])]
    path = train_sentencepiece(texts, tmp_path_factory.mktemp("spm") / "sp", vocab_size=1024)
    return traces, load_tokenizer(path)


def test_trace_encoding_trains_only_on_assistant_turns(traces_and_tokenizer):
    traces, tok = traces_and_tokenizer
    trace = traces[0]
    ex = encode_trace(trace["messages"], trace["tools"], tok)
    ids, mask = np.asarray(ex["ids"]), np.asarray(ex["mask"])
    assert len(ids) == len(mask)
    # Contiguous mask-1 spans, in order, are exactly the assistant messages + <|im_end|>.
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask, [0]])))
    spans = list(zip(edges[::2], edges[1::2]))
    assistants = [m["content"] for m in trace["messages"] if m["role"] == "assistant"]
    assert len(spans) == len(assistants)
    for (a, b), content in zip(spans, assistants):
        assert ids[b - 1] == tok.im_end_id
        assert tok.decode(ids[a : b - 1].tolist()) == content
    # Environment replies (tool / memory responses) are never trained on.
    first_reply = next(m["content"] for m in trace["messages"][3:] if m["role"] != "assistant")
    reply_ids = tok.encode(first_reply)
    start = next(i for i in range(len(ids)) if ids[i : i + len(reply_ids)].tolist() == reply_ids)
    assert mask[start : start + len(reply_ids)].sum() == 0
    # Windows keep the masks aligned and drop windows with nothing to learn.
    for w in windows(ex, 256):
        assert len(w["ids"]) == len(w["mask"]) <= 256 and sum(w["mask"][1:]) > 0


class _TraceTask:
    def __init__(self, examples):
        self.examples = examples

    def sft_examples(self):
        return self.examples

    def train_examples(self):
        return []


@pytest.mark.slow
def test_sft_lowers_loss_steadily(traces_and_tokenizer, tmp_path):
    traces, tok = traces_and_tokenizer
    examples = sft_examples(traces[:20], tok, max_len=256)
    cfg = load_config(
        None,
        [
            f"out={tmp_path}",
            "mode=sft_only",
            "task=travel",
            "eval_at_end=false",
            "sft.steps=30",
            "sft.batch_size=4",
            "sft.max_seq_len=256",
            "sft.optim.lr=3e-3",
            "checkpoint.every_steps=30",
        ],
    )
    model = build_model(cfg, vocab_size=tok.vocab_size)
    Trainer(cfg, _TraceTask(examples), model, progress=False).run()
    losses = np.array(
        [row["loss"] for _, row in sorted(read_metrics(tmp_path / "metrics.jsonl", "sft").items())]
    )
    assert len(losses) == 30
    assert losses[0] > 0.9 * np.log(tok.vocab_size)  # a random model starts near log(V)
    smoothed = np.convolve(losses, np.ones(5) / 5, mode="valid")  # 5-step moving average
    blocks = smoothed[::5]
    # Never rises by more than noise from one 5-step block to the next, and falls by > 20% overall
    # (a 2-layer model soon reaches the unigram plateau of the traces, so later blocks flatten).
    assert np.all(np.diff(blocks) < 0.03 * blocks[:-1]), blocks
    assert np.all(np.diff(blocks[:3]) < 0), blocks  # strictly falling at first
    assert smoothed[-1] < 0.8 * smoothed[0]
