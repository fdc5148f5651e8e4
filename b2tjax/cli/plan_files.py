"""The plans `launch/eval.py` scores when they come from a file: a plans file (`--plans`, one
{"id", "plan"} object per line) or a rollouts file (`--records`, each episode's answer), read for
the instances of the split's selection.

A partial rollouts file is scored on the instances it holds, and the table's header says so
(`--all-instances` for the strict reading): a run of 4 episodes is not 26 undelivered plans.
"""

from __future__ import annotations

import argparse
import collections
import logging
from pathlib import Path
from typing import Any

from b2tjax.cli.rollout_plans import plans_from_rollouts
from b2tjax.errors import UserError
from sandbox.benchmarks import Instance
from sandbox.jsonl import read_jsonl_objects

log = logging.getLogger("eval")


def _read_jsonl(path: Path) -> list[dict]:
    """The file's objects; a bad line or one without a string 'id' ends the run with its line."""
    rows = []
    for number, row in read_jsonl_objects(path, UserError):
        if not isinstance(row.get("id"), str):
            hint = " (a rollouts file: pass it with --records)" if "instance_id" in row else ""
            raise UserError(f"{path}:{number}: expected an object with a string 'id'{hint}")
        rows.append(row)
    return rows


def plans_from_file(path: Path, pairs: list[Instance]) -> dict[str, Any]:
    """id -> plan for the selected instances; plans for other ids are counted and ignored.
    An id with two plans is an error: which one to score is the user's choice, not ours."""
    wanted = {inst.id for inst in pairs}
    plans, unknown, seen = {}, 0, collections.Counter()
    rows = _read_jsonl(path)
    if not rows:
        log.warning("%s holds no plans: every instance counts as undelivered", path)
    for row in rows:
        seen[row["id"]] += 1
        if row["id"] in wanted:
            plans[row["id"]] = row.get("plan")
        else:
            unknown += 1
    duplicates = sorted(i for i, n in seen.items() if n > 1)
    if duplicates:
        shown = ", ".join(duplicates[:5]) + (", ..." if len(duplicates) > 5 else "")
        raise UserError(f"{path}: {len(duplicates)} id(s) have more than one plan: {shown}")
    if unknown:
        log.warning("%d plan(s) in %s are for instances outside the selection; ignored", unknown, path)
    return plans


def plans_from_records(path: Path, pairs: list[Instance]) -> dict[str, Any]:
    """id -> plan of the selected instances from a rollouts file; other episodes are counted and ignored."""
    wanted = {inst.id for inst in pairs}
    found = plans_from_rollouts(path)
    unknown = sum(ident not in wanted for ident in found)
    if unknown:
        log.warning("%d episode(s) in %s are for instances outside the selection; ignored", unknown, path)
    return {ident: plan for ident, plan in found.items() if ident in wanted}


def records_selection(
    args: argparse.Namespace, pairs: list[Instance], plans: dict[str, Any]
) -> tuple[list[Instance], str]:
    """The pairs a rollouts file is scored on and the table's header line saying which: the
    instances it holds, or with --all-instances the whole selection."""
    held = [inst for inst in pairs if inst.id in plans]
    if args.all_instances:
        return pairs, (
            f"{args.records.name}: every instance of split {args.split!r} ({len(pairs)}); the file holds "
            f"{len(held)}, the other {len(pairs) - len(held)} count as undelivered (--all-instances)"
        )
    if not held:
        raise UserError(f"--records {args.records} holds no episode of split {args.split!r}'s selection")
    return held, (
        f"{args.records.name}: the {len(held)} of split {args.split!r}'s {len(pairs)} instances the file "
        "holds (--all-instances scores every one, the missing as undelivered)"
    )
