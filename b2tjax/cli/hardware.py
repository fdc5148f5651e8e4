"""The recipe's `hardware:` against the devices this run found, at start-up.

A recipe sized for accelerators (an H100 recipe on a CPU, a TPU slice's recipe on fewer chips) would
build its data and model and then die out of memory or at the mesh minutes later; it is refused in
one line saying what was found, how to plan this machine, and how to run anyway.
"""

from __future__ import annotations

from b2tjax.config.schema import HardwareConfig
from b2tjax.errors import UserError


def platform_of(device_kind: str) -> str:
    """The JAX platform a recipe's `hardware.device_kind` names ("TPU v5p" -> tpu, "cpu ..." -> cpu)."""
    kind = device_kind.strip().lower()
    return "tpu" if kind.startswith("tpu") else "cpu" if kind.startswith("cpu") else "gpu"


def check_hardware(hw: HardwareConfig, platform: str, devices: int, recipe: str) -> None:
    """UserError when a sized recipe (`hardware.target` set) finds another platform or fewer
    devices than it is sized for; `platform` and `devices` are what JAX found for the whole job."""
    if not hw.target or (platform_of(hw.device_kind) == platform and devices >= hw.devices):
        return
    raise UserError(
        f"{recipe} is sized for {hw.target} ({hw.devices} x {hw.device_kind}) but this run found "
        f"{devices} x {platform}: it would run out of memory or fail at its mesh. Plan this machine "
        f"with python launch/plan.py --config {recipe} --target TARGET, or set hardware.devices="
        f"{devices} hardware.device_kind={platform} to run anyway"
    )
