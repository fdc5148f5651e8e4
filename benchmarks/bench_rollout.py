"""Speed benchmark: rollout engine throughput on a tiny random Qwen3 with the real sandbox.

Modes, measured in the same run on the same episodes:
  share 1.0 / 0.5 : `segment_return_share`: a segment returns when every row ended its turn (host
                    work then runs between segments), or when half of them did (their tools run in
                    the pool while the rest decode: host work hidden behind decoding);
  static          : continuous batching's baseline, built here: waves of `--batch` episodes, one
                    run each (other sampling keys: an episode's index in its wave).
Episodes use the agent prompt and call a real sandbox tool that takes `--tool-ms` longer (a sleep:
a slow API); 1..7 tool turns, turns capped at 8..48 sampled tokens, some turns fully scripted.

Step-shaped case (`--step P`): one GRPO step's P prompts x G = `--group` episodes, with and
without `prefix_reuse`: prompt tokens, prefill tokens computed, tokens copied instead, wall,
generated tokens/s, and whether both runs gave the same records.

Equal-memory case (`--equal-memory P`): P prompts x G = `--group` episodes, prompt lengths spread
log-uniformly over `--prompt-min`..`--prompt-max` tokens (a 1k..8k mix scaled by 1/16), episodes
ending at different lengths, GRPO groups sharing their prompt: a KV page pool of `--batch` whole
rows (max_seq_len each, the memory of a cache that reserves every row's longest stream) on
`--batch` rows, then the same pool on each of `--paged-rows` rows, one table (rows resident,
tokens/s, prefill, parks, pages, KV bytes per live token, wall, device, decode steps, records
identical to the whole rows'). `--preset` and `--max-seq-len` size it up for an accelerator
(benchmarks/gpu_check.py --checks paged).

Columns of the modes: wall, device (prefill + decode calls), host (EngineStats.host_s), generated
tokens/s, wall / max(device, host) (1.0 = host fully hidden), wall / (device + host) (1.0 = no
overlap), segments, decode steps.

    python benchmarks/bench_rollout.py [--episodes 16] [--batch 8] [--turn-tokens 48] [--tool-ms 50]
    python benchmarks/bench_rollout.py --step 4 [--group 8] [--batch 16]
    python benchmarks/bench_rollout.py --equal-memory 8 --group 8 --batch 8 --paged-rows 32
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

    from models.config import get_config
    from models.qwen3 import Qwen3ForCausalLM
    from models.spm import SentencePieceTokenizer, train_sentencepiece
    from rollout.prompt import prompt_ids, prompt_text
    from sandbox.benchmarks import b2t
    from sandbox.benchmarks.b2t.prompt import build_prompt
    from sandbox.benchmarks.b2t.world.generator import build_world

    root = Path(tempfile.mkdtemp(prefix="bench_rollout_"))
    build_world(root / "world.sqlite", scale="small", seed=0)
    world = b2t.B2TTools(b2t.open_world(root / "world.sqlite"))
    instances = [make_instance(i) for i in range(args.episodes)]
    # One of the tool schemas keeps prompts near 1.1k tokens, so a CPU run fits a 2k cache.
    schemas = [t for t in world.tool_schemas() if t["function"]["name"] == "AttractionSearch"]
    prompts = [build_prompt(inst, schemas) for inst in instances]
    corpus = [prompt_text(p) for p in prompts]
    corpus += [world.call_tool("AttractionSearch", {"city": c, "n": 3}).text for c in CITIES]
    tok = SentencePieceTokenizer(train_sentencepiece(corpus, root / "spm", vocab_size=2048))
    cfg = dataclasses.replace(
        get_config(args.preset), vocab_size=tok.vocab_size, bos_token_id=None, eos_token_id=None
    )
    model = Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0))
    return world, tok, model, [prompt_ids(p, tok) for p in prompts]


class SlowEnv:
    """An EpisodeEnv whose every step takes `seconds` longer (sleeping, as a remote tool would)."""

    def __init__(self, env, seconds: float):
        self.env, self.seconds = env, seconds

    def step(self, text: str):
        time.sleep(self.seconds)
        return self.env.step(text)


def episodes(world, tok, prompt_ids, turn_tokens: int, tool_s: float):
    """Mixed episodes: 1..7 tool turns, then the answer; per-episode turn caps 8..turn_tokens;
    every third turn fully scripted (nothing sampled), the others a scripted call + sampled text."""
    from rollout import ForcedTokens, StreamLimits
    from sandbox.env import EpisodeEnv

    class MixedEpisode(ForcedTokens):
        def __init__(self, *args, turn_cap: int, **kwargs):
            super().__init__(*args, **kwargs)
            self.turn_cap = turn_cap

        def start(self):
            [first] = super().start()
            first.limits = StreamLimits(max_turn_tokens=self.turn_cap)
            return [first]

    out = []
    for i, ids in enumerate(prompt_ids):
        turns = 1 + (i * 3) % 7
        script = {}
        for k in range(turns):
            call = SEARCH.format(city=CITIES[(i + k) % len(CITIES)])
            script[k] = call + "<|im_end|>" if (i + k) % 3 == 0 else call
        script[turns] = ANSWER
        env = SlowEnv(EpisodeEnv(world, max_turns=turns + 1, max_response_chars=300), tool_s)
        cap = min(turn_tokens, (8, 16, 32, 48)[i % 4])
        out.append(MixedEpisode(f"bench-{i}", ids, env, tok, forced_turns=script, turn_cap=cap))
    return out


def measure(name, model, tok, world, prompt_ids, config, tool_s, warm_up=True, warm_ids=None):
    """One timed run of `config` on the episodes of `prompt_ids`, after a warm-up run that compiles
    its shapes on `warm_ids` (default: the first batch_rows + 2 prompts)."""
    from rollout import RolloutEngine

    engine = RolloutEngine(model, tok, config)
    make = lambda ids: episodes(world, tok, ids, config.max_turn_tokens, tool_s)  # noqa: E731
    run = run_waves if name in STATIC else lambda engine, eps, rng: (engine.run(eps, rng=rng), engine.stats)
    if warm_up:  # compile every shape (once per mode: shapes do not depend on the tool's time)
        t0 = time.perf_counter()
        run(engine, make(warm_ids or prompt_ids[: config.batch_rows + 2]), rng=1)
        print(f"  {name}: warm-up (compilation) {time.perf_counter() - t0:.1f}s", flush=True)
    records, s = run(engine, make(prompt_ids), rng=0)
    print(f"  {name}, tool +{1000 * tool_s:.0f} ms: timed run {s.wall_s:.1f}s", flush=True)
    return {
        "mode": name,
        "tool_ms": 1000 * tool_s,
        "wall": s.wall_s,
        "device": s.device_s,
        "host": s.host_s,
        "tok_s": s.generated_tokens / s.wall_s,
        "vs_max": s.wall_s / max(s.device_s, s.host_s),
        "vs_sum": s.wall_s / (s.device_s + s.host_s),
        "segments": s.segments,
        "decode_steps": s.decode_steps,
        "prefill_tokens": s.prefill_tokens,
        "reused_tokens": s.reused_tokens,
        "generated": s.generated_tokens,
        "turns": sum(len(r.turns) for r in records) / len(records),
        "answered": sum(r.stop_reason == "answer" for r in records) / len(records),
        "batch_rows": config.batch_rows,
        "rows_mean": s.rows_decoding / max(1, s.segments),
        "rows_per_step": s.generated_tokens / max(1, s.decode_steps),
        "rows_peak": s.peak_rows_decoding,
        "peak_pages": s.peak_pages,
        "parks": s.parks,
        "peak_shared_pages": s.peak_shared_pages,
        "kv_bytes_per_token": s.kv_bytes_per_live_token,
        "final_len": [len(r.ids) for r in records],
        "ids": [r.ids for r in records],
    }


MODES = {  # name -> RolloutConfig overrides
    "(a) continuous": {},
    "(b) continuous share 0.5": dict(segment_return_share=0.5),
    "(c) static": {},
}
STATIC = {"(c) static"}  # run as waves (run_waves)


def run_waves(engine, episodes: list, rng: int):
    """Static batching, the baseline: one run per wave of batch_rows episodes; counts summed (peaks:
    the largest), rows as configured."""
    from rollout import EngineStats

    rows = engine.config.batch_rows
    records, total = [], EngineStats()
    for start in range(0, len(episodes), rows):
        records += engine.run(episodes[start : start + rows], rng=rng)
        for field in dataclasses.fields(EngineStats):
            a, b = getattr(total, field.name), getattr(engine.stats, field.name)
            setattr(total, field.name, max(a, b) if field.name.startswith("peak") else a + b)
    total.rows = rows
    return records, total


def write_json(path: Path | None, rows: list[dict]) -> None:
    if path is not None:
        path.write_text(json.dumps([{k: v for k, v in r.items() if k != "ids"} for r in rows], indent=1))


def step_case(args: argparse.Namespace, world, tok, model, prompt_ids, base: dict) -> list[dict]:
    """The step-shaped case: `args.step` prompts x `args.group` episodes, reuse off then on."""
    from rollout import RolloutConfig

    step_ids = [ids for ids in prompt_ids[: args.step] for _ in range(args.group)]
    print(f"step: {args.step} prompts x G={args.group} = {len(step_ids)} episodes on {args.batch} rows")
    rows = []
    for reuse in (False, True):
        config = RolloutConfig(**base, prefix_reuse=reuse)
        name = f"prefix reuse {'on' if reuse else 'off'}"
        row = measure(name, model, tok, world, step_ids, config, args.tool_ms / 1000)
        row["prompt_tokens"] = sum(map(len, step_ids))
        rows.append(row)
    print(
        f"{'step case':18s} {'prompt tok':>10s} {'prefilled':>9s} {'reused':>7s} {'wall s':>7s} "
        f"{'device s':>8s} {'gen tok/s':>9s} {'segments':>8s}"
    )
    for r in rows:
        print(
            f"{r['mode']:18s} {r['prompt_tokens']:10d} {r['prefill_tokens']:9d} {r['reused_tokens']:7d} "
            f"{r['wall']:7.2f} {r['device']:8.2f} {r['tok_s']:9.1f} {r['segments']:8d}"
        )
    off, on = rows
    print(
        f"with reuse: prefill tokens x{on['prefill_tokens'] / off['prefill_tokens']:.3f}, "
        f"wall {off['wall'] / on['wall']:.2f}x faster; records identical: {off['ids'] == on['ids']}"
    )
    return rows


def mixed_prompts(tok, prompt_ids: list[list[int]], count: int, low: int, high: int) -> list[list[int]]:
    """`count` prompts with lengths spread log-uniformly over low..high tokens (like a 1k..8k mix):
    the first tokens of an agent prompt, closed by the assistant header so the model answers."""
    tail = tok.encode("<|im_end|>\n<|im_start|>assistant\n")
    out = []
    for i in range(count):
        n = round(low * (high / low) ** (i / max(1, count - 1)))
        ids = prompt_ids[i % len(prompt_ids)]
        ids = ids * -(-n // len(ids))  # a prompt longer than the agent prompt repeats it
        out.append(ids[: n - len(tail)] + tail)
    return out


def memory_case(args: argparse.Namespace, world, tok, model, prompt_ids, base: dict) -> list[dict]:
    """Equal cache memory: `args.batch` whole rows' pool on `args.batch` rows, then on more rows."""
    from rollout import RolloutConfig

    prompts = mixed_prompts(tok, prompt_ids, args.equal_memory, args.prompt_min, args.prompt_max)
    step_ids = [ids for ids in prompts for _ in range(args.group)]
    whole = RolloutConfig(**base)
    pool = whole.pool_pages
    print(
        f"equal memory: {args.equal_memory} prompts ({', '.join(str(len(p)) for p in prompts)} tokens) "
        f"x G={args.group} = {len(step_ids)} episodes; {args.batch} whole rows x "
        f"{whole.cache_slots} slots = a pool of {pool} pages of {whole.page_size}"
    )
    configs = [("whole rows", whole)]
    for n in args.paged_rows:
        paged = dict(base, batch_rows=n, tool_workers=n, kv_pages=pool)
        configs.append((f"pool on {n} rows", RolloutConfig(**paged)))
    tool_s = args.tool_ms / 1000
    # The warm-up runs every episode once (other samples): the length mix needs every prefill width.
    rows = [measure(name, model, tok, world, step_ids, c, tool_s, warm_ids=step_ids) for name, c in configs]
    print(
        f"{'cache':18s} {'rows':>4s} {'mean':>5s} {'tok/step':>8s} {'peak':>4s} {'gen tok/s':>9s} "
        f"{'prefilled':>9s} {'parks':>5s} {'pages pk':>8s} {'shared pk':>9s} {'KV B/tok':>8s} "
        f"{'wall s':>7s} {'device s':>8s} {'steps':>6s} {'vs whole':>8s} {'same':>5s}"
    )
    ref = rows[0]
    for r in rows:
        print(
            f"{r['mode']:18s} {r['batch_rows']:4d} {r['rows_mean']:5.1f} {r['rows_per_step']:8.1f} "
            f"{r['rows_peak']:4d} {r['tok_s']:9.1f} {r['prefill_tokens']:9d} {r['parks']:5d} "
            f"{r['peak_pages']:8d} {r['peak_shared_pages']:9d} {r['kv_bytes_per_token']:8.0f} "
            f"{r['wall']:7.2f} {r['device']:8.2f} {r['decode_steps']:6d} "
            f"{r['tok_s'] / ref['tok_s']:7.2f}x {str(r['ids'] == ref['ids']):>5s}"
        )
    lengths = sorted(rows[0]["final_len"])
    print(
        f"episode final lengths {lengths[0]}-{lengths[-1]} tokens (mean {sum(lengths) / len(lengths):.0f}); "
        f"generated tokens {ref['generated']}"
    )
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--turn-tokens", type=int, default=48)
    p.add_argument("--tool-ms", type=float, default=50.0, help="extra time every tool call takes")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES), metavar="MODE")
    p.add_argument(
        "--slow-tool-ms",
        type=float,
        default=400.0,
        help="also run the first two modes with this tool time, where host work weighs more (0: skip)",
    )
    p.add_argument("--step", type=int, default=0, help="run only the step-shaped case with this many prompts")
    p.add_argument("--group", type=int, default=8, help="episodes per prompt in the step-shaped case")
    p.add_argument("--page-size", type=int, default=16)
    p.add_argument("--max-seq-len", type=int, default=2048, help="rollout.max_seq_len (a whole row's slots)")
    p.add_argument(
        "--preset", default="tiny", help="model shape (models.config), random weights, the bench's vocab"
    )
    p.add_argument(
        "--equal-memory", type=int, default=0, help="run only the equal-memory case with this many prompts"
    )
    p.add_argument("--paged-rows", type=int, nargs="+", default=[32], help="batch rows of the paged runs")
    p.add_argument("--prompt-min", type=int, default=64, help="shortest prompt of the equal-memory case")
    p.add_argument("--prompt-max", type=int, default=512, help="longest prompt of the equal-memory case")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    args.episodes = max(args.episodes, args.step, args.equal_memory)
    return args


def modes_case(args: argparse.Namespace, world, tok, model, prompt_ids, base: dict) -> list[dict]:
    """Every `--modes` mode on the same episodes (the first two again with `--slow-tool-ms`); records
    compared across the continuous modes (static waves sample with other keys)."""
    from rollout import RolloutConfig

    cases = [(name, args.tool_ms) for name in args.modes]
    if args.slow_tool_ms:
        cases += [(name, args.slow_tool_ms) for name in args.modes[:2]]
    rows, warm = [], set()
    for name, ms in cases:
        config = RolloutConfig(**base, **MODES[name])
        rows.append(measure(name, model, tok, world, prompt_ids, config, ms / 1000, name not in warm))
        warm.add(name)
    same = all(r["ids"] == rows[0]["ids"] for r in rows if r["mode"] not in STATIC)
    print(
        f"{'mode':26s} {'tool ms':>7s} {'wall s':>7s} {'device s':>8s} {'host s':>7s} {'gen tok/s':>9s} "
        f"{'wall/max':>8s} {'wall/sum':>8s} {'segments':>8s} {'steps':>6s} {'prefill':>8s} {'turns/ep':>8s}"
    )
    for r in rows:
        print(
            f"{r['mode']:26s} {r['tool_ms']:7.0f} {r['wall']:7.2f} {r['device']:8.2f} {r['host']:7.2f} "
            f"{r['tok_s']:9.1f} {r['vs_max']:8.2f} {r['vs_sum']:8.2f} {r['segments']:8d} "
            f"{r['decode_steps']:6d} {r['prefill_tokens']:8d} {r['turns']:8.1f}"
        )
    print(f"records identical across the continuous modes: {same}")
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    world, tok, model, prompt_ids = build(args)
    base = dict(
        batch_rows=args.batch,
        max_turns=8,
        max_turn_tokens=args.turn_tokens,
        max_seq_len=args.max_seq_len,
        temperature=1.0,
        turn_cap="close",
        prefill_chunk=512,
        prefill_min_bucket=64,
        tool_workers=args.batch,
        page_size=args.page_size,
    )
    case = memory_case if args.equal_memory else step_case if args.step else modes_case
    slow = args.slow_tool_ms if case is modes_case else 0
    slow_text = f" (+{slow:.0f} ms: the last rows)" if slow else ""
    print(
        f"{args.preset} Qwen3 ({model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}), "
        f"vocab {tok.vocab_size}, {args.episodes} episodes, "
        f"batch {args.batch}, prompts {min(map(len, prompt_ids))}-{max(map(len, prompt_ids))} tokens, "
        f"1-7 tool turns, turn caps 8-{args.turn_tokens} tokens, tools +{args.tool_ms:.0f} ms{slow_text}"
    )
    write_json(args.json, case(args, world, tok, model, prompt_ids, base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
