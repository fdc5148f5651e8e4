r"""Run a benchmark's tool loop with the `openai` client against launch/serve.py, one recorded
session per instance, then score the sessions like rollouts.

    python launch/serve.py --checkpoint CKPT --records sessions.jsonl &
    python docs/examples/serve_client.py --data DATA --num 4            # B2T (or --benchmark travelplanner)
    python launch/eval.py --data DATA --records sessions.jsonl --split test

The prompt and tools are the benchmark's own (what training rolls out with); the tools run here, in
this process; the final `<answer>...</answer>` closes the session with it.
"""

from __future__ import annotations

import argparse
import json
import re
import urllib.request
from pathlib import Path

from openai import BadRequestError, OpenAI

from sandbox.benchmarks import benchmark_class
from sandbox.env import truncate_middle

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


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
    client = OpenAI(base_url=args.base_url, api_key="unused")
    for visible in bench.load_visible(args.split)[: args.num]:
        answer = run_instance(client, args.base_url, bench, visible, args.max_turns)
        print(visible["id"], "answered" if answer else "no answer")


if __name__ == "__main__":
    main()
