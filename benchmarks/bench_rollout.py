"""Rollout engine throughput on a tiny random Qwen3 with the real sandbox.

Modes, measured in the same run on the same episodes:
  (a) engine      : per-row KV cache kept across turns, continuous batching (rows refilled);
  (b) re-prefill  : same engine, but the whole record is fed again every turn (no cache reuse);
  (c) static      : KV cache kept, but a new wave of episodes starts only when the whole batch is done.
Episodes use the agent prompt (three tool schemas + trajectory), call a real sandbox tool every turn
(teacher-forced call text, then sampled continuation) and answer after 3..7 turns, so lengths differ.
Reports generated tokens/s, episodes/s, host share of wall time, and ratios against (a).

    python benchmarks/bench_rollout.py [--episodes 16] [--batch 8] [--turn-tokens 48]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

SEARCH = (
    '<think>\nlook up sights\n</think>\n\n<tool_call>\n{{"name": "AttractionSearch", "arguments": '
    '{{"city": "{city}", "n": 2}}}}\n</tool_call>'
)
ANSWER = "<think>\ndone\n</think>\n\n<answer>[]</answer><|im_end|>"
CITIES = ("Chengdu", "Beijing", "Shanghai", "Hangzhou")


def make_instance(i: int) -> dict:
    events = []
    for k in range(4 + 2 * (i % 3)):
        action = ("click", "add_to_favorites", "book")[k % 3]
        events.append(
            {
                "timestamp": f"2026-03-{1 + k // 4:02d} 1{k % 10}:00",
                "session": 1 + k // 4,
                "action": action,
                "poi_type": "hotel",
                "poi_id": f"H-Chengdu-{k}",
                "poi_name": f"Hotel {k}",
                "details": {"city": "Chengdu", "star": "5-Star/Luxury", "price": 900 + k},
            }
        )
    return {
        "id": f"bench-{i}",
        "instruction": f"Plan a {3 + i % 3}-day trip from Shanghai to Chengdu for two.",
        "trajectory": events,
    }


def build(args: argparse.Namespace):
    from flax import nnx

    import sandbox
    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from rollout.prompt import prompt_ids, prompt_text
    from sandbox.benchmarks.b2t_prompt import build_prompt
    from sandbox.world.generator import build_world

    root = Path(tempfile.mkdtemp(prefix="bench_rollout_"))
    build_world(root / "world.sqlite", scale="small", seed=0)
    world = sandbox.open_world(root / "world.sqlite")
    instances = [make_instance(i) for i in range(args.episodes)]
    # Three of the nine tool schemas keep prompts near 1.5k tokens, so a CPU run fits a 4k cache.
    schemas = [
        t
        for t in world.tool_schemas()
        if t["function"]["name"] in ("AttractionSearch", "RestaurantSearch", "AccommodationSearch")
    ]
    prompts = [build_prompt(inst, schemas) for inst in instances]
    corpus = [prompt_text(p) for p in prompts]
    corpus += [world.call_tool("AttractionSearch", {"city": c, "n": 3}).text for c in CITIES]
    tok = SentencePieceTokenizer(train_sentencepiece(corpus, root / "spm", vocab_size=2048))
    cfg = dataclasses.replace(get_config("tiny"), vocab_size=tok.vocab_size)
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    return world, tok, model, [prompt_ids(p, tok) for p in prompts]


def episodes(world, tok, prompt_ids):
    from rollout import ForcedTokens
    from sandbox.env import EpisodeEnv

    out = []
    for i, ids in enumerate(prompt_ids):
        turns = 2 + (i * 3) % 5  # 2..6 tool turns, then the answer turn
        script = {k: SEARCH.format(city=CITIES[(i + k) % len(CITIES)]) for k in range(turns)}
        script[turns] = ANSWER
        env = EpisodeEnv(world, max_turns=turns + 1, max_response_chars=300)
        out.append(ForcedTokens(f"bench-{i}", ids, env, tok, forced_turns=script))
    return out


def measure(name, model, tok, world, prompt_ids, config):
    from rollout import RolloutEngine

    engine = RolloutEngine(model, tok, config)
    t0 = time.perf_counter()
    engine.run(episodes(world, tok, prompt_ids[: config.batch_rows + 2]), rng=1)  # compile every shape
    print(f"  {name}: warm-up (compilation) {time.perf_counter() - t0:.1f}s", flush=True)
    t0 = time.perf_counter()
    records = engine.run(episodes(world, tok, prompt_ids), rng=0)
    wall = time.perf_counter() - t0
    s = engine.stats
    print(f"  {name}: timed run {wall:.1f}s", flush=True)
    return {
        "mode": name,
        "tok_s": s.generated_tokens / wall,
        "ep_s": len(records) / wall,
        "wall": wall,
        "host_share": s.host_share,
        "prefill_tokens": s.prefill_tokens,
        "generated": s.generated_tokens,
        "decode_steps": s.decode_steps,
        "device_s": s.device_s,
        "turns": sum(len(r.turns) for r in records) / len(records),
        "answered": sum(r.stop_reason == "answer" for r in records) / len(records),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--turn-tokens", type=int, default=48)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    from rollout import RolloutConfig

    world, tok, model, prompt_ids = build(args)
    base = dict(
        batch_rows=args.batch,
        max_turns=8,
        max_turn_tokens=args.turn_tokens,
        max_seq_len=4096,
        temperature=1.0,
        turn_cap="close",
        prefill_chunk=512,
        prefill_min_bucket=64,
    )
    print(
        f"tiny Qwen3 (2 layers, hidden 64), vocab {tok.vocab_size}, {args.episodes} episodes, "
        f"batch {args.batch}, "
        f"prompts {min(map(len, prompt_ids))}-{max(map(len, prompt_ids))} tokens, "
        f"{args.turn_tokens} tokens/turn"
    )
    rows = [
        measure("(a) engine", model, tok, world, prompt_ids, RolloutConfig(**base)),
        measure("(c) static batching", model, tok, world, prompt_ids, RolloutConfig(**base, refill=False)),
        measure(
            "(b) re-prefill each turn", model, tok, world, prompt_ids, RolloutConfig(**base, reprefill=True)
        ),
    ]
    ref = rows[0]
    print(
        f"{'mode':26s} {'gen tok/s':>10s} {'ep/s':>7s} {'wall s':>7s} {'host %':>7s} {'prefill tok':>12s} "
        f"{'decode steps':>12s} {'turns/ep':>8s} {'answered':>8s} {'(a)/mode':>9s}"
    )
    for r in rows:
        print(
            f"{r['mode']:26s} {r['tok_s']:10.1f} {r['ep_s']:7.2f} {r['wall']:7.2f} "
            f"{100 * r['host_share']:7.1f} "
            f"{r['prefill_tokens']:12d} {r['decode_steps']:12d} {r['turns']:8.1f} {r['answered']:8.0%} "
            f"{ref['tok_s'] / r['tok_s']:9.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
