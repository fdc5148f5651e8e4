"""Speed benchmark: the OpenAI-compatible endpoint (launch/serve.py) under 32 concurrent clients vs
one request at a time, beside `transformers` `generate` serving the same exported model the naive
way (one request at a time), in one run; a 3-turn session's prefix reuse in the engine's counters;
and streaming: time to first token and the gap between chunks of streamed replies, alone and
beside 31 busy non-streaming clients, per `--stream-segment` (one server each; the engine's whole
segment, `--max-tokens`, is how streaming worked before it had its own), with the non-streaming
clients' throughput.

    python benchmarks/bench_serve.py [--requests 64] [--max-tokens 48] [--skip-transformers]
                                     [--stream-tokens 128] [--stream-segments 4 16]

The model is the tiny recipe's shape (preset `tiny`: 2 layers, hidden 64) over a SentencePiece
vocabulary trained here, random weights, saved as a Hugging Face directory; greedy requests of
different short prompts, each `--max-tokens` long (a random model seldom ends a turn early).
Tokens/s counts completion tokens over wall time, client to client.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
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


def streamed(base: str, messages: list[dict], max_tokens: int) -> tuple[float, list[float], int]:
    """One streamed reply, sampled at temperature 1 (a random model's greedy reply repeats one blank
    piece: no text to stream): (seconds to its first text delta, seconds between text deltas,
    completion tokens), timed at the client as the server-sent events arrive."""
    host, port = base.removeprefix("http://").split(":")
    body = {"messages": messages, "temperature": 1.0, "seed": 0, "max_tokens": max_tokens, "stream": True}
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    reply, arrivals, tokens = conn.getresponse(), [], 0
    for line in reply:
        if not line.startswith(b"data: {"):
            continue
        choice = json.loads(line[6:])["choices"][0]
        if choice["delta"].get("content") or choice["delta"].get("reasoning_content"):
            arrivals.append(time.perf_counter())
        tokens = len(choice.get("token_ids") or []) or tokens
    conn.close()
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return arrivals[0] - start, gaps, tokens


def keep_busy(base: str, conversations: list, max_tokens: int, stop: threading.Event, done: list) -> None:
    """A non-streaming client asking one request after another until `stop`; tokens into `done`."""
    while not stop.is_set():
        for messages in conversations:
            reply = post(base, {"messages": messages, "temperature": 0, "max_tokens": max_tokens})
            done.append(reply["usage"]["completion_tokens"])
            if stop.is_set():
                return


def stream_row(base: str, conversations: list, args: argparse.Namespace) -> dict[str, float]:
    """Streamed replies one after another, alone and then beside 31 non-streaming clients."""
    row: dict[str, float] = {}
    for load in (False, True):
        stop, done, tokens = threading.Event(), [], []
        jobs = (base, conversations, args.max_tokens, stop, done)
        threads = [threading.Thread(target=keep_busy, args=jobs) for _ in range(31 if load else 0)]
        for t in threads:
            t.start()
        time.sleep(2.0 if load else 0.0)  # the batch is full before the first streamed request
        start, firsts, gaps = time.perf_counter(), [], []
        for messages in conversations[: args.streams]:
            first, between, n = streamed(base, messages, args.stream_tokens)
            firsts.append(first)
            gaps += between
            tokens.append(n)
        wall = time.perf_counter() - start
        stop.set()
        for t in threads:
            t.join()
        key = "busy" if load else "alone"
        row[f"{key}_ttft"] = statistics.median(firsts)
        row[f"{key}_gap"] = statistics.median(gaps) if gaps else float("nan")
        row[f"{key}_chunks"] = (len(gaps) + len(firsts)) / len(firsts)
        row[f"{key}_tps"] = sum(tokens) / wall
        if load:
            row["others_tps"] = sum(done) / wall
    return row


def print_stream_table(rows: list, args: argparse.Namespace) -> None:
    print()
    print(
        f"streamed replies of {args.stream_tokens} sampled tokens, {args.streams} one after another "
        f"(engine segment {args.max_tokens} tokens); alone, then beside 31 non-streaming clients; ms"
    )
    print(
        "| stream segment | first token | chunk gap | text chunks/reply | busy: first token | busy: chunk gap"
        " | busy: the 31 others' tok/s | 32 clients, no stream: tok/s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for segment, row in rows:
        print(
            f"| {segment} | {1e3 * row['alone_ttft']:.1f} | {1e3 * row['alone_gap']:.1f} | "
            f"{row['alone_chunks']:.1f} | {1e3 * row['busy_ttft']:.1f} | {1e3 * row['busy_gap']:.1f} | "
            f"{row['others_tps']:.0f} | {row['plain_tps']:.0f} |"
        )


def print_table(rows: list, args: argparse.Namespace, prompt: int, reused: int) -> None:
    reference = rows[0][1]
    print(f"{args.requests} greedy requests, {args.max_tokens} tokens each; tiny preset, random weights")
    print(f"| {'server':<44} | completion tok/s | requests/s | vs one at a time |")
    print(f"|{'-' * 46}|-----------------:|-----------:|-----------------:|")
    for name, tps, rps in rows:
        print(f"| {name:<44} | {tps:16.1f} | {rps:10.2f} | {tps / reference:15.2f}x |")
    print(f"session of 3 turns: {reused} of its later turns' {prompt} prompt tokens copied (prefix reuse)")


@contextlib.contextmanager
def serving(hf_dir: Path, max_tokens: int, stream_segment: int) -> Iterator[str]:
    """A launch/serve.py process on a free port, warmed up; yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = ["rollout.batch_rows=32", "rollout.max_seq_len=512", f"rollout.max_turn_tokens={max_tokens}"]
    cmd = [sys.executable, str(ROOT / "launch/serve.py"), "--hf", str(hf_dir), "--trust-unverified"]
    cmd += ["--port", str(port), "--stream-segment", str(stream_segment), *engine]
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
        yield base
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--skip-transformers", action="store_true")
    p.add_argument("--stream-tokens", type=int, default=128, help="a streamed reply's max_tokens")
    p.add_argument("--streams", type=int, default=8, help="streamed replies per measurement")
    p.add_argument("--stream-segments", type=int, nargs="+", default=[4, 16])
    args = p.parse_args()
    skip_absent_tpu()
    tmp = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    hf_dir = build_model(tmp / "hf")
    conversations = prompts(args.requests)
    stream_rows = []
    # the engine's own segment first: how a streamed reply arrived before it had a segment of its own
    for segment in [args.max_tokens, *args.stream_segments]:
        with serving(hf_dir, args.max_tokens, segment) as base:
            # warm-up: the prefill programs compile per (rows, width) bucket that the arrivals make
            for _ in range(2):
                serve_rate(base, conversations, args.max_tokens, 32)
            serve_rate(base, conversations[:8], args.max_tokens, 1)
            streamed(base, conversations[0], args.stream_tokens)  # its segment's decode program
            if segment == args.max_tokens:
                rows = [
                    ("serve, 1 client (one at a time)", *serve_rate(base, conversations, args.max_tokens, 1))
                ]
                runs = sorted(serve_rate(base, conversations, args.max_tokens, 32) for _ in range(3))
                rows.append(("serve, 32 concurrent clients (median of 3)", *runs[1]))
                if not args.skip_transformers:
                    ids = [
                        post(base, {"messages": m, "max_tokens": 1})["prompt_token_ids"]
                        for m in conversations
                    ]
                    rows.append(
                        (
                            "transformers generate, one at a time",
                            *transformers_rate(hf_dir, ids, args.max_tokens),
                        )
                    )
                prompt, reused = session_reuse(base)
            row = stream_row(base, conversations, args)
            row["plain_tps"] = sorted(
                serve_rate(base, conversations, args.max_tokens, 32)[0] for _ in range(3)
            )[1]
            label = f"{segment} (the engine's: before)" if segment == args.max_tokens else str(segment)
            stream_rows.append((label, row))
    print_table(rows, args, prompt, reused)
    print_stream_table(stream_rows, args)


if __name__ == "__main__":
    main()
