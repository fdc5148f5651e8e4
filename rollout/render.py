"""Environment replies -> Qwen3 chat tokens, appended after the sampled `<|im_end|>`.

The record after a turn ends with the sampled `<|im_end|>`; the reply appended (mask 0) is

    "\n<|im_start|>user\n" + blocks + "<|im_end|>\n<|im_start|>assistant\n"

so that record text == Qwen3's official chat template text: the template closes every turn with
"<|im_end|>\n" and renders consecutive tool results as one user turn of "\n"-joined
`<tool_response>\n...\n</tool_response>` blocks (sandbox.EpisodeEnv's `step.rendered`). Memory
replies come in the same blocks (a `<memory_response>` inside the `<tool_response>`), so the
template, which keeps the reasoning of every assistant turn after the last real user query and
counts no `<tool_response>`-wrapped turn as one, keeps every earlier `<think>` block too: a policy
served through its exported tokenizer's chat template sees what it was trained on (docs/SPEC.md
section 6). Tokens are built piecewise around the special tokens, which equals tokenising the whole
template text (special tokens split the text); a `<|im_end|>` written in a reply is text
(`encode_text`), never a turn boundary.

What the template does not reproduce (tests/rollout/test_chat_parity.py,
tests/rollout/test_rollout_engine.py::test_record_text_equals_chat_template): the record ends at the
final sampled <|im_end|> (the template adds "\n"), and a sampled turn that is not in Qwen3's
native form (no reasoning block on a final turn, extra newlines around `<think>`) is normalised
by the template while the record keeps exactly what the model sampled.
"""

from __future__ import annotations

from typing import Any


def reply_text(body: str) -> str:
    """The full reply text appended after a sampled <|im_end|> (see module docstring)."""
    return f"\n<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"


def render_env_reply(tokenizer: Any, body: str) -> list[int]:
    """Token ids of `reply_text(body)`, built around the special tokens.

    `body` is an environment step's `rendered` text: response blocks joined by "\n", each response
    already truncated in the middle by the environment (sandbox.env.truncate_middle), so closing
    tags always survive.
    """
    start, end = tokenizer.im_start_id, tokenizer.im_end_id
    return (
        tokenizer.encode("\n")
        + [start]
        + tokenizer.encode_text(f"user\n{body}")  # the environment's text: no special tokens
        + [end]
        + tokenizer.encode("\n")
        + [start]
        + tokenizer.encode("assistant\n")
    )
