"""RolloutEngine: batched multi-turn generation with a per-row KV cache and continuous batching.

One run loops over three phases until every episode has finished:
  1. admit: free rows take queued streams / the next episodes (continuous batching). When streams
     are queued and no row is free, a *waiting* stream (turn ended, neither continued nor stopped:
     e.g. a HiMAP coordinator waiting for its day executors) is parked: its row is freed, its record
     kept; when continued it is queued again and its whole record is re-prefilled
     (`EngineStats.reprefill_tokens`), less what prefix reuse copies. Without parking, waiting
     coordinators can hold every row while their own executors are queued, and the run deadlocks;
  2. prefill: a stream starting a row first copies the KV of its record's longest prefix that
     another row holds (prefix reuse, rollout/prefix.py: a GRPO group's prompt, a HiMAP team's
     shared system + tools, a parked stream's old row); then only tokens not yet in a row's
     cache are fed (prompt of a new stream, environment reply + forced tokens of a continuing
     one), in chunks of at most `prefill_chunk` per row;
     only rows with pending tokens are computed (a refill of one row costs one row);
  3. decode: one jitted `lax.while_loop` segment until every live row has stopped its turn (or,
     with `segment_return_share` < 1, that share of them: the rest continue next segment);
  then the host hands finished turns to their episodes (tool calls run in a thread pool, episodes
  in parallel, one episode's streams one at a time in creation order), appends the replies with
  mask 0 and enforces the limits.

Host work and the device: finished turns are handed to the pool as one job per episode (an
episode's callbacks chained, never concurrent). With `segment_return_share` 1.0 (the default) they
drain between segments; below 1 a segment returns once that share of its rows ended a turn and
their tools run while the rest decode (rollout/schedule.py says why and how).

Limits (per stream: the config's, or tighter ones the episode gives in `Continue.limits`):
`max_turns`, `max_turn_tokens` (sampled tokens in one turn; `turn_cap="stop"` ends the episode,
`"close"` appends a forced <|im_end|> with mask 0 and lets the environment answer),
`max_seq_len` (record length, prompt included; `StreamLimits.max_total_tokens` for one stream).
Each limit sets its stop reason; such records are `truncated`. Episode callbacks that raise are
recorded as StopReason.ERROR, never re-raised.

Sampling keys derive from (run rng, episode index, stream ordinal, position), never from the batch
row, so any schedule of rows and segments, with or without parking, produces the same episodes.
`run` returns one EpisodeRecord per stream (one per episode for single-agent episodes), in episode
order then stream-creation order.

Modules, one job each: rollout/run.py (the loop of one run: admission, parking, limits),
rollout/schedule.py (host work against the device), rollout/clock.py (policy versions of a
streaming session), rollout/actions.py (what episode actions do to streams), rollout/stream.py (a stream's
`Phase`, the row table), rollout/device.py (the device state, argument building and every host
<-> device transfer), rollout/programs.py (the jitted prefill and decode programs),
rollout/host_jobs.py (episode callbacks in the pool), rollout/stats.py (`EngineStats`),
rollout/lockstep.py (the loop on several processes).

Several processes (a pod, one JAX process per host): every process calls `run(episodes, local=...)`
with the same episode list; each drives only its `local` episodes (rollout.hosts.episode_owner
decides) in the rows on its own devices (`RowTable.local`), runs their host jobs once, feeds its
rows' tokens as process-local data and reads back only its addressable shards (rollout/device.py);
rollout/lockstep.py keeps every process calling each jitted program in the same order, with one
small collective per round (which also carries a stop request). `run` then returns this
process' records only. Prefix reuse copies among a process' own rows; every process joins each
copy call, with everyone's pairs (rollout/device.py).

Streaming across training steps: `session()` keeps one run alive while the trainer
updates the weights (rollout/session.py).

Prefix reuse (built): `Run._seat` + `DeviceCalls.prefill` are the single admission step that
puts a stream's context into its row: take what other local rows hold (rollout/prefix.py; whole
pages shared by reference, rollout/kv_pool.py), then prefill the rest.
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from models.causal_lm import CausalLM
from rollout.config import RolloutConfig
from rollout.episodes import Episode
from rollout.lockstep import loop_across_hosts
from rollout.programs import ModelRunner
from rollout.record import EpisodeRecord
from rollout.run import RolloutStopped as RolloutStopped  # where callers import it from
from rollout.run import Run
from rollout.session import RolloutSession
from rollout.stats import EngineStats


class RolloutEngine:
    """Runs episodes on a model; see the module docstring."""

    def __init__(
        self, model: CausalLM, tokenizer: Any, config: RolloutConfig | None = None, mesh: Mesh | None = None
    ):
        self.config = config or RolloutConfig()
        auto = self.config.cache_dtype == "auto"
        self.cache_dtype = model.dtype if auto else self.config.cache_dtype  # "auto": compute dtype
        self.model_config = model.config
        self.tokenizer = tokenizer
        self.mesh = mesh  # rows of the KV cache over (data, fsdp), KV heads and weights over tensor
        replay = self.config.router_replay == "replay"
        if replay and model.config.moe is None:
            raise ValueError("rollout.router_replay: replay needs a Qwen3-MoE model (this one is dense)")
        # The model's padded embedding rows past the tokenizer's ids are never sampled.
        self.runner = ModelRunner(
            model,
            valid_vocab=min(tokenizer.vocab_size, model.config.vocab_size),
            mesh=mesh,
            paged_attention=self.config.paged_attention,
            routes=replay,
        )
        self.stop_ids = jnp.asarray([tokenizer.im_end_id, tokenizer.eos_id], jnp.int32)
        self.stats = EngineStats()
        # Debug hook, called as trace(stream_key, event, fed_ids, position) for every chunk fed to
        # the model ("prefill"), every prefix copied from another row ("copy", at position 0) and
        # every decoded segment ("decode"); tests use it to prove that the model's input is the
        # record so far.
        self.trace: Callable[[tuple[int, str], str, list[int], int], None] | None = None
        self.progress: Callable[[int, int], None] | None = None  # progress(done, total)

    def update_weights(self, model: CausalLM) -> None:
        """Use new weights (same architecture) without recompiling."""
        self.runner.update_state(model)

    def session(self, rng: int = 0) -> RolloutSession:
        """A streaming run across training steps (rollout/session.py)."""
        return RolloutSession(self, rng)

    def run(
        self,
        episodes: Sequence[Episode],
        rng: jax.Array | int = 0,
        should_stop: Callable[[], bool] | None = None,
        local: Sequence[bool] | None = None,
    ) -> list[EpisodeRecord]:
        """Roll out every episode; returns one record per stream, in episode order then stream order.
        `should_stop` is polled every round (one process: after each decode segment; several: in
        the round's collective, so all stop together); when true, RolloutStopped is raised.
        `local[i]`: this process drives episode i (several processes; default all): the records
        returned are those of the local episodes."""
        key = jax.random.key(rng) if isinstance(rng, int) else rng
        with concurrent.futures.ThreadPoolExecutor(self.config.tool_workers) as pool:
            run = Run(self, list(episodes), key, pool, None if local is None else list(local))
            loop = run.loop if jax.process_count() == 1 else functools.partial(loop_across_hosts, run)
            if not loop(should_stop):
                raise RolloutStopped("the rollout was asked to stop; its partial records are dropped")
        self.stats = run.stats
        return [r for ep_streams in run.streams for s in ep_streams.values() for r in s.records]
