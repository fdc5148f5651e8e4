r"""Serve a policy behind an OpenAI-compatible chat endpoint, on the rollout engine.

    python launch/serve.py --checkpoint runs/x/checkpoints --port 8000
    python launch/serve.py --hf hf_export/ --config configs/recipe.yaml --records sessions.jsonl
    python launch/serve.py --checkpoint CKPT rollout.batch_rows=32 rollout.max_turn_tokens=128

Routes: POST /v1/chat/completions, GET /v1/models, GET /health, GET /v1/stats (the engine's
counters), POST /v1/sessions/{id}/close. Requests with an `X-Session-Id` header are recorded as one
episode each in --records (launch/eval.py --records scores the file). The engine's settings come
from the policy defaults, then the recipe's `rollout:` section, then `rollout.key=value`.
Listens on 127.0.0.1 only, unless --host names another address, which needs --api-key.
docs/guides/serve.md lists the fields and extensions. Needs the `serve` extra (pip install .[serve]).
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import logging
import sys
from pathlib import Path

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import UserError, add_trust_option, run_main, setup_logging, trust_from_args
from b2tjax.config import freeze, load_rollout_config
from b2tjax.run.policy import ROLLOUT_DEFAULTS, checkpoint_error, load_policy

log = logging.getLogger("serve")
STREAM_SEGMENT = 4  # docs/results/serve.md: time to first token and chunk gaps by segment


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", type=Path, help="model checkpoint or a training run's checkpoints/")
    src.add_argument("--hf", type=Path, help="a Hugging Face directory (launch/export_hf.py's output)")
    p.add_argument(
        "--tokenizer", help="'qwen3', a HF dir or a SentencePiece .model (default: the checkpoint's)"
    )
    p.add_argument("--config", type=Path, help="YAML recipe whose rollout: section sets the engine")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", help="required as 'Authorization: Bearer KEY'; needed off the loopback")
    p.add_argument("--model-name", default="b2tjax", help="the id /v1/models lists and requests name")
    p.add_argument("--records", type=Path, help="JSONL file that closed sessions are appended to")
    p.add_argument("--max-body-bytes", type=int, default=4 << 20, help="larger requests get 413")
    p.add_argument("--seed", type=int, default=0, help="sampling seed of requests without their own")
    p.add_argument(
        "--stream-segment",
        type=int,
        default=STREAM_SEGMENT,
        help="decode steps between a streamed reply's chunks (the batch it shares returns to the host "
        f"as often while it decodes; at most rollout.max_turn_tokens; default {STREAM_SEGMENT})",
    )
    add_trust_option(p)
    p.add_argument("overrides", nargs="*", metavar="rollout.key=value", help="rollout config overrides")
    return p.parse_intermixed_args(argv)


PATHS = Paths(outputs=("--records",), inputs=("--checkpoint", "--hf", "--config", "--tokenizer"))


def check_arguments(args: argparse.Namespace) -> None:
    """Fail before loading anything: the records file, the address, the key, the checkpoint."""
    guard(args, PATHS)
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback and not args.api_key:
        raise UserError(f"--host {args.host} listens beyond this machine: give --api-key too")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be in [0, 65535], got {args.port}")
    if (error := checkpoint_error(args.checkpoint or args.hf)) is not None:
        raise UserError(error.replace("--checkpoint", "--hf" if args.hf else "--checkpoint"))
    if args.stream_segment < 1:
        raise UserError(f"--stream-segment must be at least 1, got {args.stream_segment}")
    if args.records is not None and not args.records.parent.is_dir():
        raise UserError(f"--records {args.records}: its directory does not exist")


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    args = parse_args(argv)
    trust_from_args(args)
    check_arguments(args)
    try:
        import uvicorn

        from rollout.serve.app import build_app
    except ImportError as err:
        raise UserError(f"serving needs the serve extra (pip install '.[serve]'): {err}") from None
    from rollout import RolloutEngine
    from rollout.serve.service import ChatService
    from rollout.serve.sessions import SessionBook
    from rollout.serve.worker import EngineWorker

    try:
        config = load_rollout_config(args.config, args.overrides, base=ROLLOUT_DEFAULTS)
        # a served turn cut at its segment is continued (rollout/serve/service.py), never closed;
        # the client owns its conversation, so a recipe's context budget never folds it here
        config = freeze(dataclasses.replace(config, turn_cap="stop", context_budget=0))
        if args.stream_segment > config.max_turn_tokens:
            raise UserError(
                f"--stream-segment {args.stream_segment} exceeds "
                f"rollout.max_turn_tokens={config.max_turn_tokens}"
            )
        policy = load_policy(args.checkpoint or args.hf, args.tokenizer)
    except ValueError as err:
        raise UserError(str(err)) from None
    worker = EngineWorker(RolloutEngine(policy.model, policy.tokenizer, config), rng=args.seed)
    sessions = SessionBook(args.records, policy.tokenizer_spec)
    service = ChatService(worker, config, args.model_name, sessions, args.stream_segment)
    app = build_app(service, args.api_key, args.max_body_bytes)
    log.info(
        "serving %s as %r on http://%s:%d/v1",
        args.checkpoint or args.hf,
        args.model_name,
        args.host,
        args.port,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:  # sessions still open are written without an answer
        worker.close()
        sessions.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
