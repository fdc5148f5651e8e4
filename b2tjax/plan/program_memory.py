"""One compiled program's per-device memory, and the verdict and table `launch/plan.py` prints.

Kept apart from the compiling (b2tjax/plan/memory_plan.py) so what a plan reports is readable on
its own: a program fits when its peak plus what stays resident beside it leaves HEADROOM of the
device's memory free, and a compiler's refusal (a TPU out of memory) is a program that does not fit.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jax.sharding import Mesh

GIB = 1024**3
HEADROOM = 0.10  # a program must leave this share of device memory free


@dataclasses.dataclass
class ProgramMemory:
    """Per-device bytes of one compiled program and of what is resident beside it."""

    name: str
    arguments: dict[str, int]  # argument group -> bytes of its shards on one device (from shardings)
    argument_bytes: int  # the compiler's figures from here on
    output_bytes: int
    alias_bytes: int  # outputs written into donated argument buffers
    temp_bytes: int
    resident: dict[str, int]
    analytic: dict[str, int]  # closed-form sizes of the same groups, as a cross-check
    notes: list[str] = dataclasses.field(default_factory=list)
    compile_s: float = 0.0
    error: str = ""  # the compiler's refusal (e.g. TPU out of memory); the program does not fit
    # split placement (b2tjax/plan/split_plan.py): whose device the figures are, "train" or
    # "rollout", and the mesh the program runs on; "" co-located (every device is both)
    side: str = ""
    placement: str = ""

    @property
    def peak_bytes(self) -> int:
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes

    @property
    def total_bytes(self) -> int:
        return self.peak_bytes + sum(self.resident.values())

    @property
    def label(self) -> str:
        """The name, with the mesh it runs on under the split placement."""
        return f"{self.name} ({self.placement})" if self.placement else self.name


def _gib(n: int) -> str:
    return f"{n / GIB:9.3f}"


def format_table(p: ProgramMemory, hbm_bytes: int) -> str:
    """One program's per-device memory as a Markdown table."""
    rows = [(f"argument: {k}", v, p.analytic.get(k)) for k, v in p.arguments.items()]
    rows += [
        ("arguments (compiled)", p.argument_bytes, None),
        ("outputs", p.output_bytes, None),
        ("donated (outputs reuse arguments)", -p.alias_bytes, None),
        ("temporaries", p.temp_bytes, None),
        ("program peak", p.peak_bytes, None),
    ]
    rows += [(f"resident: {k}", v, p.analytic.get(k)) for k, v in p.resident.items()]
    rows.append(("total", p.total_bytes, None))
    lines = [
        f"{p.name} (per device{', ' + p.placement if p.placement else ''})",
        f"| {'':<40} | {'GiB':>9} | {'analytic GiB':>12} |",
        f"|{'-' * 42}|{'-' * 11}|{'-' * 14}|",
    ]
    for label, value, analytic in rows:
        extra = _gib(analytic) if analytic is not None else ""
        lines.append(f"| {label:<40} | {_gib(value)} | {extra:>12} |")
    if hbm_bytes and not p.error:
        share = p.total_bytes / hbm_bytes
        lines.append(f"| {'device memory':<40} | {_gib(hbm_bytes)} | {f'{share:.0%} used':>12} |")
    lines += [f"note: {note}" for note in p.notes]
    if p.error:
        return "\n".join([*lines, f"DOES NOT FIT: the compiler refused it: {p.error}"])
    if hbm_bytes:
        verdict = "fits" if fits(p, hbm_bytes) else "DOES NOT FIT"
        lines.append(f"{verdict} with {HEADROOM:.0%} headroom")
    lines.append(f"compiled in {p.compile_s:.0f}s")
    return "\n".join(lines)


def as_dict(p: ProgramMemory) -> dict:
    """The figures of one program, bytes per device (for --json)."""
    return dict(dataclasses.asdict(p), peak_bytes=p.peak_bytes, total_bytes=p.total_bytes)


def fits(p: ProgramMemory, hbm_bytes: int) -> bool:
    return not p.error and p.total_bytes <= (1 - HEADROOM) * hbm_bytes


def failures(programs: list[ProgramMemory], hbm_bytes: int) -> list[str]:
    """One line per program that does not fit `hbm_bytes` with the headroom."""
    limit = int((1 - HEADROOM) * hbm_bytes)
    refused = [f"{p.label} does not compile: {p.error}" for p in programs if p.error]
    return refused + [
        f"{p.label} needs {p.total_bytes:,} bytes ({p.total_bytes / GIB:.2f} GiB) per device, more than "
        f"{limit:,} bytes ({limit / GIB:.2f} GiB = {1 - HEADROOM:.0%} of {hbm_bytes / GIB:.1f} GiB)"
        for p in programs
        if hbm_bytes and not p.error and not fits(p, hbm_bytes)
    ]


def mesh_summary(mesh: Mesh | None) -> str:
    if mesh is None:
        return "1 device, no mesh"
    return (
        " x ".join(f"{k} {v}" for k, v in mesh.shape.items())
        + f" ({np.prod(list(mesh.shape.values()))} devices)"
    )
