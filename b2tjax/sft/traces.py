"""SFT data: expert chain-of-action traces -> token ids with a loss mask on assistant tokens only.

A trace is laid out token for token like a rollout record (rollout/record.py), so SFT teaches
exactly the sequences the policy later samples: the prompt rendered by the chat template with the
tool schemas and the generation prompt (mask 0), then per assistant turn its content + <|im_end|>
(mask 1), and between turns the environment reply as `rollout.render.render_env_reply` frames it
(mask 0). The whole trace + "\n" is what Qwen3's official chat template renders from its messages
(docs/SPEC.md section 6), so a served policy sees the context SFT taught it. The SFT step itself
is `train_step.make_step_fns(...).sft_step` (token-mean NLL).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models.chat import render
from rollout.render import render_env_reply
from sandbox.env import PYTHON_TOOL_NAME


def encode_trace(messages: Sequence[dict[str, Any]], tools: Sequence[dict] | None, tokenizer: Any) -> dict:
    """{"ids": [...], "mask": [...]} for one trace (system/user prompt, then alternating turns)."""
    roles = [m.get("role") for m in messages]
    if "assistant" not in roles:
        raise ValueError("an SFT trace needs at least one assistant message")
    first = roles.index("assistant")
    prompt = render(list(messages[:first]), tools=list(tools) if tools else None, add_generation_prompt=True)
    ids = list(tokenizer.encode(prompt))
    mask = [0] * len(ids)
    i = first
    while i < len(messages):
        if roles[i] == "assistant":
            turn = list(tokenizer.encode(messages[i]["content"])) + [tokenizer.im_end_id]
            ids += turn
            mask += [1] * len(turn)
            i += 1
            continue
        j = i
        while j < len(messages) and roles[j] != "assistant":
            j += 1
        if j == len(messages):  # trailing environment text after the last turn teaches nothing
            break
        reply = render_env_reply(tokenizer, "\n".join(m["content"] for m in messages[i:j]))
        ids += reply
        mask += [0] * len(reply)
        i = j
    return {"ids": ids, "mask": mask}


def windows(example: dict, max_len: int) -> list[dict]:
    """Cut a long example into consecutive windows of at most `max_len` tokens that hold at least
    one trained token. Whole traces fit on real hardware; the tiny CPU recipe trains on windows."""
    ids, mask = example["ids"], example["mask"]
    out = []
    for start in range(0, len(ids), max_len):
        piece = {"ids": ids[start : start + max_len], "mask": mask[start : start + max_len]}
        if sum(piece["mask"][1:]) > 0:  # position 0 of a window has no prediction
            out.append(piece)
    return out


def sft_examples(
    traces: Sequence[dict],
    tokenizer: Any,
    max_len: int,
    default_tools: Sequence[dict] | None = None,
    python: bool = True,
) -> list[dict]:
    """Encode every trace ({"messages", "tools"?}) and cut it into training windows. `python=False`
    (a run whose episodes get no Python runner) leaves the Python tool out of the prompt's tools,
    as the rollouts' prompt does: SFT trains on the prompt the policy will be given."""
    out = []
    for trace in traces:
        tools = trace.get("tools") or default_tools
        out.extend(windows(encode_trace(trace["messages"], tools_offered(tools, python), tokenizer), max_len))
    if not out:
        raise ValueError("no SFT example holds an assistant token")
    return out


def tools_offered(tools: Sequence[dict] | None, python: bool) -> list[dict] | None:
    """`tools` as a prompt lists them: without the Python tool when the episodes run none."""
    if tools is None or python:
        return None if tools is None else list(tools)
    return [t for t in tools if t.get("function", t).get("name") != PYTHON_TOOL_NAME]
