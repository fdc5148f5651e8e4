"""A benchmark's prompt (chat messages + tool schemas, pure data) -> the text and ids the model sees.

Benchmarks build prompts in sandbox/ without importing models; this is where they meet the Qwen3
chat template (models.chat.render, with the generation prompt) and the run's tokenizer.
"""

from __future__ import annotations

from typing import Any

from models.chat import encode_chat, render
from sandbox.benchmarks.base import Prompt, TokenCounter


def prompt_text(prompt: Prompt) -> str:
    """The exact string the model is conditioned on, ending with the assistant header."""
    return render(prompt.messages, tools=prompt.tools, add_generation_prompt=True)


def prompt_ids(prompt: Prompt, tokenizer: Any) -> list[int]:
    """The ids of `prompt_text`; the messages' text (a HiMAP sub-goal a model wrote) never becomes
    a special token (models.chat.encode_chat)."""
    return encode_chat(tokenizer, prompt.messages, prompt.tools, add_generation_prompt=True)


def token_counter(tokenizer: Any) -> TokenCounter:
    """Counts a prompt's tokens, so a benchmark can compact its prompt to a budget."""
    return lambda prompt: len(prompt_ids(prompt, tokenizer))
