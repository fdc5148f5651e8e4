"""The lookup task: a multi-turn tool-use task whose reward needs what the tool returned.

Every episode draws a fresh secret table (key -> value). The prompt names a key; the only way to
learn its value is the `lookup` tool, whose reply reaches the policy as environment tokens (loss
mask 0); the answer must repeat that value. Reward 1 iff the episode looked up the prompt's key and
answered with the value it got back, so a policy that ignores the reply scores 1 / num_values.

It runs the real multi-turn path -- RolloutEngine, an `Episode`, the Qwen chat framing
(`models.chat.render` for the prompt, `rollout.render.render_env_reply` for the reply) and the
trainer -- on a word-level vocabulary small enough for CPU tests:

    prompt : <|im_start|> user k2 <|im_end|> <|im_start|> assistant
    turn 1 : lookup k2 <|im_end|>                                             (sampled, mask 1)
    reply  : <|im_start|> user result v5 <|im_end|> <|im_start|> assistant   (environment, mask 0)
    turn 2 : answer v5 <|im_end|>                                             (sampled, mask 1)

`blind=True` is the control: the reply's content tokens are replaced by padding in the policy's
context, so the value never reaches it.

Several processes (a pod): given the run's mesh, each process drives the episodes it owns
(rollout.hosts.episode_owner, a prompt's group on one process) in its own rows and runs their
lookups once; the orchestrator pools every process' records in episode order (the global batch).

Its rollout metrics are `success`, `lookup_rate`, `answered`, `action_error_rate` and the engine /
per-process counts (`rollout/*`, `hosts/*`), as the benchmark task's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from flax import nnx
from jax.sharding import Mesh
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from b2tjax.grpo.update import RolloutBatch
from b2tjax.tasks.base import ProcessPart
from b2tjax.tasks.hosts import engine_counts, episode_owners, host_counts
from models.chat import render
from models.tokenizer import ENDOFTEXT, IM_END, IM_START, HFTokenizer
from rollout.config import RolloutConfig
from rollout.engine import RolloutEngine
from rollout.episodes import Continue, Episode, Stop, TurnOutcome
from rollout.record import EpisodeRecord
from rollout.render import render_env_reply
from rollout.sampler import Sampler
from rollout.session import RolloutSession
from sandbox.types import StopReason

LOOKUP, ANSWER, RESULT, ERROR = "lookup", "answer", "result", "error"


@dataclasses.dataclass(frozen=True)
class LookupConfig:
    num_keys: int = 4
    num_values: int = 4  # chance = 1 / num_values; 4 is what tests/b2tjax/test_tool_learning.py trains
    blind: bool = False  # control: the policy never sees the tool's reply
    sft_demos: int = 64  # scripted demonstrations of the protocol (answers not tied to the value)
    eval_episodes: int = 128  # greedy episodes of `evaluate` (= the tests' rollout rows: no recompile)
    max_turns: int = 3
    max_turn_tokens: int = 4  # "lookup k2 <|im_end|>" is 3 tokens
    temperature: float = 1.0


def key_word(k: int) -> str:
    return f"k{k}"


def value_word(v: int) -> str:
    return f"v{v}"


def lookup_tokenizer(num_keys: int, num_values: int) -> HFTokenizer:
    """A word-level `tokenizers` model with the Qwen chat tokens, behind the project's HFTokenizer."""

    specials = [ENDOFTEXT, IM_START, IM_END]
    words = specials + ["<unk>", "user", "assistant", LOOKUP, ANSWER, RESULT, ERROR]
    words += [key_word(k) for k in range(num_keys)] + [value_word(v) for v in range(num_values)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens([AddedToken(w, special=True, normalized=False) for w in specials])
    return HFTokenizer(backend, name=f"lookup-words-{num_keys}x{num_values}")


def prompt_ids(tokenizer: Any, key: int) -> list[int]:
    return tokenizer.encode(render([{"role": "user", "content": key_word(key)}], add_generation_prompt=True))


def reply_ids(tokenizer: Any, body: str, blind: bool) -> list[int]:
    """The environment reply framed as a user turn; `blind` pads out its content tokens."""
    ids = render_env_reply(tokenizer, body)
    if not blind:
        return ids
    content = set(tokenizer.encode(body))
    return [tokenizer.pad_id if t in content else t for t in ids]


class LookupEpisode(Episode):
    """One episode: `table[k]` is the value the tool returns for key k (drawn per episode)."""

    def __init__(self, instance_id: str, key: int, table: Sequence[int], tokenizer: Any, blind: bool = False):
        self.instance_id = instance_id
        self.key = key
        self.table = list(table)
        self.tokenizer = tokenizer
        self.blind = blind
        self.looked_up: set[int] = set()
        self.answer: str | None = None
        # Counted where the turns are handled, apart from the records: (lookups run, calls answered).
        self.executed = [0, 0]

    def start(self) -> list[Continue]:
        return [Continue("main", prompt_ids(self.tokenizer, self.key))]

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        words = text.split()
        if len(words) == 2 and words[0] == ANSWER:
            self.answer = words[1]
            return TurnOutcome([Stop(stream, StopReason.ANSWER, words[1])])
        if len(words) == 2 and words[0] == LOOKUP:
            key = _index(words[1], "k", len(self.table))
            if key is not None:
                self.looked_up.add(key)
                self.executed[0] += 1
            self.executed[1] += 1
            body = f"{RESULT} {value_word(self.table[key]) if key is not None else ERROR}"
            reply = reply_ids(self.tokenizer, body, self.blind)
            return TurnOutcome([Continue(stream, reply)], [key is None], [LOOKUP])
        # Anything else breaks the protocol: an action error that ends the episode unanswered.
        self.executed[1] += 1
        return TurnOutcome([Stop(stream, StopReason.EOS if eos else StopReason.DONE)], [True], ["invalid"])

    def reward(self) -> float:
        """1 iff the prompt's key was looked up and the answer is the value the tool returned."""
        return float(self.key in self.looked_up and self.answer == value_word(self.table[self.key]))


def _index(word: str, prefix: str, limit: int) -> int | None:
    digits = word[len(prefix) :]
    if word.startswith(prefix) and digits.isdigit() and int(digits) < limit:
        return int(digits)
    return None


def demo_example(tokenizer: Any, key: int, table: Sequence[int], answer: int) -> dict:
    """A scripted trace {"ids", "mask"} laid out like a rollout record: mask 1 on assistant turns."""
    ids, mask = [], []

    def add(tokens: list[int], trained: bool) -> None:
        ids.extend(tokens)
        mask.extend([int(trained)] * len(tokens))

    add(prompt_ids(tokenizer, key), False)
    add(tokenizer.encode(f"{LOOKUP} {key_word(key)}") + [tokenizer.im_end_id], True)
    add(render_env_reply(tokenizer, f"{RESULT} {value_word(table[key])}"), False)
    add(tokenizer.encode(f"{ANSWER} {value_word(answer)}") + [tokenizer.im_end_id], True)
    return {"ids": ids, "mask": mask}


class LookupTask:
    """The trainer's Task protocol for the lookup task (see the module docstring)."""

    def __init__(self, cfg: LookupConfig, tokenizer: Any | None = None, mesh: Mesh | None = None):
        self.cfg = cfg
        self.tokenizer = tokenizer or lookup_tokenizer(cfg.num_keys, cfg.num_values)
        self.mesh = mesh  # the sampler's mesh (b2tjax.run.mesh.rollout_mesh): needed on several processes
        self._rollouts = Sampler(self.tokenizer, mesh)  # the engine, kept across steps

    def train_examples(self) -> Sequence[int]:
        return list(range(self.cfg.num_keys))

    def sft_examples(self) -> list[dict]:
        """Demonstrations of the PROTOCOL only: the lookup is right, the answer is an independent
        random value, so imitation alone stays at chance on the reward."""
        rng = np.random.default_rng(1234)
        c = self.cfg
        demos = []
        for _ in range(c.sft_demos):
            key, table = int(rng.integers(c.num_keys)), rng.integers(c.num_values, size=c.num_keys)
            demos.append(demo_example(self.tokenizer, key, table, answer=int(rng.integers(c.num_values))))
        return demos

    def episodes(self, keys: Sequence[int], seed: int) -> list[LookupEpisode]:
        """One episode per key, each with its own table drawn from (seed, position)."""
        c = self.cfg
        tables = [
            np.random.default_rng([seed, i]).integers(c.num_values, size=c.num_keys) for i in range(len(keys))
        ]
        return [
            LookupEpisode(f"lookup-{seed}-{i}", int(k), table, self.tokenizer, c.blind)
            for i, (k, table) in enumerate(zip(keys, tables))
        ]

    def _engine_config(self, rows: int, temperature: float) -> RolloutConfig:
        c = self.cfg
        return RolloutConfig(
            batch_rows=rows,
            max_turns=c.max_turns,
            max_turn_tokens=c.max_turn_tokens,
            max_seq_len=64,
            temperature=temperature,
            prefill_chunk=64,
            prefill_min_bucket=16,
            turn_cap="stop",
            tool_workers=1,
        )

    def run(
        self,
        engine: RolloutEngine,
        keys: Sequence[int],
        seed: int,
        should_stop: Callable[[], bool] | None = None,
        group_size: int = 1,
    ) -> ProcessPart[RolloutBatch]:
        """Roll out one episode per key; this process' episodes rewarded. Pooled: every record, in
        episode order, and the metrics."""

        episodes = self.episodes(keys, seed)
        owners, local = episode_owners(len(keys), group_size, seed)
        records = engine.run(episodes, seed, should_stop=should_stop, local=local)
        return self._part(records, episodes, owners, local, engine.stats)

    def _part(self, records, episodes, owners, local, stats) -> ProcessPart[RolloutBatch]:
        """Rewards on this process' records, each with whether its episode looked its key up."""
        mine = [e for e, here in zip(episodes, local or [True] * len(episodes)) if here]
        for record, episode in zip(records, mine):
            record.reward = episode.reward()
        looked = [e.key in e.looked_up for e in mine]
        executed = [sum(e.executed[i] for e in mine) for i in range(2)]
        return ProcessPart(_batch, list(zip(records, looked)), owners, engine_counts(executed, stats))

    # -- streaming (rollout.max_staleness > 0; b2tjax/run/streaming.py) -----------------------------
    def open_session(self, model: nnx.Module, seed: int, rollout: RolloutConfig) -> RolloutSession:
        """A session with the trainer's streaming knobs (`rollout`: its rollout section) and rows
        for every step in flight, (max_staleness + 1) x P x G: each step's episodes start when they
        are submitted, so the records of the last step submitted reach the full staleness bound
        (with P x G rows a step's episodes would wait for the previous step's to start)."""
        steps = rollout.max_staleness + 1
        config = dataclasses.replace(
            self._engine_config(steps * rollout.prompts_per_step * rollout.group_size, self.cfg.temperature),
            max_staleness=rollout.max_staleness,
            resume_kv=rollout.resume_kv,
        )
        return RolloutEngine(model, self.tokenizer, config, mesh=self.mesh).session(seed)

    def submit_stream(self, session: RolloutSession, prompts: list[int], group_size: int, seed: int):
        """Queue one step's P x G episodes; the handle `collect_stream` takes them back with."""
        keys = [k for k in prompts for _ in range(group_size)]
        episodes = self.episodes(keys, seed)
        owners, local = episode_owners(len(keys), group_size, seed)
        return episodes, owners, local, session.submit(episodes, local)

    def collect_stream(self, session: RolloutSession, handle, should_stop=None) -> ProcessPart[RolloutBatch]:
        """Decode until the handle's episodes have finished; this process' share of their batch."""
        episodes, owners, local, indices = handle
        records = session.advance(indices, should_stop)
        for record in records:  # numbered within the step, as a plain run numbers them
            record.episode = indices.index(record.episode)
        return self._part(records, episodes, owners, local, session.stats)

    def rollout(
        self,
        model: nnx.Module,
        prompts: list[int],
        group_size: int,
        seed: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> ProcessPart[RolloutBatch]:
        keys = [k for k in prompts for _ in range(group_size)]
        engine = self._rollouts.engine_for(model, self._engine_config(len(keys), self.cfg.temperature))
        return self.run(engine, keys, seed, should_stop=should_stop, group_size=group_size)

    def evaluate(self, model: nnx.Module) -> ProcessPart[tuple[dict, str]]:
        """Greedy success on fixed tables (seed 2**31 - 1: never a training step's seed)."""
        n = self.cfg.eval_episodes
        engine = RolloutEngine(model, self.tokenizer, self._engine_config(n, temperature=0.0), mesh=self.mesh)
        part = self.run(engine, [i % self.cfg.num_keys for i in range(n)], seed=2**31 - 1)
        return part.then(
            lambda batch: (
                batch.metrics,
                f"lookup task: greedy success {batch.metrics['success']:.2f} over {n} episodes",
            )
        )

    def eval_episodes(self) -> None:
        """No HTML report: the toy task's episodes are not a benchmark's."""
        return None


def _batch(items: list[tuple[EpisodeRecord, bool]], counts: np.ndarray) -> RolloutBatch:
    """Every process' (record, looked its key up), pooled: the batch and its metrics."""
    records, looked = [r for r, _ in items], [x for _, x in items]
    metrics = {
        "success": float(np.mean([r.reward for r in records])),
        "lookup_rate": float(np.mean(looked)),
        "answered": float(np.mean([r.stop_reason == StopReason.ANSWER for r in records])),
        "action_error_rate": float(np.mean([r.any_error for r in records])),
        **host_counts(records, counts),
    }
    return RolloutBatch(records, metrics)
