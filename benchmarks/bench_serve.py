"""Speed benchmark: the OpenAI-compatible endpoint (launch/serve.py) under 32 concurrent clients vs
one request at a time, beside `transformers` `generate` serving the same exported model the naive
way (one request at a time), in one run; and a 3-turn session's prefix reuse in the engine's counters.

    python benchmarks/bench_serve.py [--requests 64] [--max-tokens 48] [--skip-transformers]

The model is the tiny recipe's shape (preset `tiny`: 2 layers, hidden 64) over a SentencePiece
vocabulary trained here, random weights, saved as a Hugging Face directory; greedy requests of
different short prompts, each `--max-tokens` long (a random model seldom ends a turn early).
Tokens/s counts completion tokens over wall time, client to client.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from b2tjax.cli.script import skip_absent_tpu

ROOT = Path(__file__).resolve().parents[1]
WORDS = "plan a trip from shanghai to chengdu hotel flight train budget museum dinner day".split()


def build_model(out: Path) -> Path:
    from flax import nnx

    from models.config import get_config
    from models.hf import save_pretrained
    from models.qwen3 import Qwen3ForCausalLM
    from models.spm import SentencePieceTokenizer, train_sentencepiece

    corpus = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(40)) for i in range(200)]
    spm = train_sentencepiece(corpus, out / "spm", vocab_size=1000)
    tok = SentencePieceTokenizer(spm)
    model = Qwen3ForCausalLM(get_config("tiny", vocab_size=tok.vocab_size), rngs=nnx.Rngs(0))
    save_pretrained(model, out, tokenizer=tok)
    return out


def prompts(n: int) -> list[list[dict]]:
    return [
        [{"role": "user", "content": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(8 + i % 5))}]
        for i in range(n)
    ]


def post(base: str, body: dict, headers: dict | None = None) -> dict:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        base + "/v1/chat/completions", data, {"Content-Type": "application/json", **(headers or {})}
    )
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


def serve_rate(base: str, conversations: list, max_tokens: int, clients: int) -> tuple[float, float]:
    """(completion tokens/s, requests/s) of the conversations sent by `clients` concurrent clients."""

    def ask(messages: list[dict]) -> int:
        reply = post(base, {"messages": messages, "temperature": 0, "max_tokens": max_tokens})
        return reply["usage"]["completion_tokens"]

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        tokens = sum(pool.map(ask, conversations))
    wall = time.perf_counter() - start
    return tokens / wall, len(conversations) / wall


def transformers_rate(hf_dir: Path, ids: list[list[int]], max_tokens: int) -> tuple[float, float]:
    """`generate` one request at a time (greedy): how a exported model is served the naive way."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        model.generate(torch.tensor([ids[0]]), max_new_tokens=4, do_sample=False)  # warm-up
        start, tokens = time.perf_counter(), 0
        for prompt in ids:
            out = model.generate(torch.tensor([prompt]), max_new_tokens=max_tokens, do_sample=False)
            tokens += out.shape[1] - len(prompt)
    wall = time.perf_counter() - start
    return tokens / wall, len(ids) / wall


def session_reuse(base: str) -> tuple[int, int]:
    """(prompt tokens, tokens whose KV was copied) over a 3-turn tool session's later turns."""
    messages = [{"role": "user", "content": " ".join(WORDS * 3)}]
    before = json.loads(urllib.request.urlopen(base + "/v1/stats").read())["reused_tokens"]
    prompt = 0
    for turn in range(3):
        reply = post(
            base, {"messages": messages, "temperature": 0, "max_tokens": 8}, {"X-Session-Id": "bench"}
        )
        prompt += reply["usage"]["prompt_tokens"] if turn else 0
        messages += [reply["choices"][0]["message"], {"role": "tool", "content": f"result {turn}"}]
    after = json.loads(urllib.request.urlopen(base + "/v1/stats").read())["reused_tokens"]
    return prompt, after - before


def print_table(rows: list, args: argparse.Namespace, prompt: int, reused: int) -> None:
    reference = rows[0][1]
    print(f"{args.requests} greedy requests, {args.max_tokens} tokens each; tiny preset, random weights")
    print(f"| {'server':<44} | completion tok/s | requests/s | vs one at a time |")
    print(f"|{'-' * 46}|-----------------:|-----------:|-----------------:|")
    for name, tps, rps in rows:
        print(f"| {name:<44} | {tps:16.1f} | {rps:10.2f} | {tps / reference:15.2f}x |")
    print(f"session of 3 turns: {reused} of its later turns' {prompt} prompt tokens copied (prefix reuse)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--skip-transformers", action="store_true")
    args = p.parse_args()
    skip_absent_tpu()
    tmp = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    hf_dir = build_model(tmp / "hf")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = [
        "rollout.batch_rows=32",
        "rollout.max_seq_len=512",
        f"rollout.max_turn_tokens={args.max_tokens}",
    ]
    cmd = [
        sys.executable,
        str(ROOT / "launch/serve.py"),
        "--hf",
        str(hf_dir),
        "--trust-unverified",
        "--port",
        str(port),
        *engine,
    ]
    server = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.5)
        conversations = prompts(args.requests)
        # warm-up: the prefill programs compile per (rows, width) bucket that the arrivals make
        for _ in range(2):
            serve_rate(base, conversations, args.max_tokens, 32)
        serve_rate(base, conversations[:8], args.max_tokens, 1)
        rows = [("serve, 1 client (one at a time)", *serve_rate(base, conversations, args.max_tokens, 1))]
        runs = sorted(serve_rate(base, conversations, args.max_tokens, 32) for _ in range(3))
        rows.append(("serve, 32 concurrent clients (median of 3)", *runs[1]))
        if not args.skip_transformers:
            ids = [post(base, {"messages": m, "max_tokens": 1})["prompt_token_ids"] for m in conversations]
            rows.append(
                ("transformers generate, one at a time", *transformers_rate(hf_dir, ids, args.max_tokens))
            )
        prompt, reused = session_reuse(base)
    finally:
        server.terminate()
        server.wait(timeout=60)
    print_table(rows, args, prompt, reused)


if __name__ == "__main__":
    main()
