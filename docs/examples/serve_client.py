r"""Run a benchmark's tool loop with the `openai` client against launch/serve.py, one recorded
session per instance, then score the sessions like rollouts.

    python launch/serve.py --checkpoint CKPT --records sessions.jsonl &
    python docs/examples/serve_client.py --data DATA --num 4            # B2T (or --benchmark travelplanner)
    python launch/eval.py --data DATA --records sessions.jsonl --split test

The prompt and tools are the benchmark's own (what training rolls out with); the tools run here, in
this process; the final `<answer>...</answer>` closes the session with it. Importable: the
evaluation notebook starts the server with `serving` and runs `run_sessions` (notebooks/).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from openai import BadRequestError, OpenAI

from sandbox.benchmarks import benchmark_class
from sandbox.env import truncate_middle

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
SERVE = Path(__file__).resolve().parents[2] / "launch" / "serve.py"


@contextlib.contextmanager
def serving(args: list[str], timeout_s: float = 600, env: dict[str, str] | None = None) -> Iterator[str]:
    """launch/serve.py `args` on a free loopback port (in `env`, default this process'), stopped on
    exit (its open sessions then written); yields its base URL (`.../v1`) once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SERVE), "--port", str(port), *args], env=env)
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout_s
    try:
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"launch/serve.py did not start (exit code {server.poll()})") from None
                time.sleep(0.5)
        yield base + "/v1"
    finally:
        server.terminate()
        server.wait(timeout=60)


def run_instance(client: OpenAI, base: str, bench, visible: dict, max_turns: int) -> str | None:
    prompt, world = bench.prompt(visible, memory=False), bench.world_for(visible)  # no memory module here
    messages, session = list(prompt.messages), {"X-Session-Id": visible["id"]}
    answer, answered = None, False
    for _ in range(max_turns):
        try:
            reply = client.chat.completions.create(
                model="b2tjax", messages=messages, tools=prompt.tools, temperature=0, extra_headers=session
            )
        except BadRequestError as err:  # the conversation outgrew the server's context
            print(visible["id"], err.message)
            break
        answered = True  # the server records a session from its first answered turn
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if found := ANSWER.search(message.content or ""):
            answer = found.group(1).strip()
            break
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            result = world.call_tool(call.function.name, json.loads(call.function.arguments or "{}"))
            text = truncate_middle(result.text, 6000)  # as the training environment caps a reply
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    if answered:
        close = urllib.request.Request(
            f"{base}/sessions/{visible['id']}/close", json.dumps({"answer": answer}).encode(), method="POST"
        )
        urllib.request.urlopen(close).read()
    return answer


def run_sessions(base: str, bench, instances: list[dict], max_turns: int) -> dict[str, str | None]:
    """Each instance's tool loop as one recorded session; its answer (None: none) by instance id."""
    client = OpenAI(base_url=base, api_key="unused")
    return {v["id"]: run_instance(client, base, bench, v, max_turns) for v in instances}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    p.add_argument("--benchmark", default="b2t")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--num", type=int, default=4)
    p.add_argument("--max-turns", type=int, default=10)
    args = p.parse_args()
    bench = benchmark_class(args.benchmark)(args.data)
    instances = bench.load_visible(args.split)[: args.num]
    for name, answer in run_sessions(args.base_url, bench, instances, args.max_turns).items():
        print(name, "answered" if answer else "no answer")


if __name__ == "__main__":
    main()
