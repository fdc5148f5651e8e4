"""Device memory of the grouped matmul a Qwen3-MoE layer runs (`jax.lax.ragged_dot`), by compiler.

One expert projection of Qwen3-30B-A3B: M token copies [M, 2048] (bf16) against 128 experts'
[2048, 768], grouped by expert, compiled for one chip of `--target` by its own compiler (as
launch/plan.py does, nothing allocated). Printed: the compiler's temporaries beside the operands,
and their ratio to the [M, 2048] input: a grouped kernel needs none; a lowering that runs every
expert on every copy (masking the others) holds about 128 inputs.

    python benchmarks/bench_ragged_dot_memory.py --target v5p-8     # the [tpu] extra
    python benchmarks/bench_ragged_dot_memory.py --target h100-1    # the [plan-cuda] extra
"""

from __future__ import annotations

import argparse
import os

from b2tjax.cli.script import quiet_compile_only_libtpu

EXPERTS, HIDDEN, INTER = 128, 2048, 768
GIB = 1024**3


def temporaries(target, tokens: int) -> int:
    """Temporary bytes of ragged_dot([tokens, H] x [E, H, I]) compiled for one chip of `target`."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    from b2tjax.plan.targets import target_devices

    on = SingleDeviceSharding(target_devices(target)[0])
    sds = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=on)  # noqa: E731
    args = (
        sds((tokens, HIDDEN), jnp.bfloat16),
        sds((EXPERTS, HIDDEN, INTER), jnp.bfloat16),
        sds((EXPERTS,), jnp.int32),
    )
    compiled = jax.jit(jax.lax.ragged_dot).lower(*args).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", default="v5p-8", help="a launch/plan.py target: v5p-8, h100-1, ...")
    parser.add_argument("--tokens", default="8192,65536,524288", help="token copies M, comma-separated")
    args = parser.parse_args()
    os.environ["JAX_PLATFORMS"] = "cpu"  # the host backend; the target's devices are compile-only
    from b2tjax.plan.targets import parse_target

    target = parse_target(args.target)
    if target.platform == "tpu":
        quiet_compile_only_libtpu(target.name)
    print(f"| target | token copies M | input [M, {HIDDEN}] GiB | temporaries GiB | temporaries / input |")
    print("|---|---|---|---|---|")
    for tokens in (int(t) for t in args.tokens.split(",")):
        temp, size = temporaries(target, tokens), tokens * HIDDEN * 2
        print(
            f"| {target.name} | {tokens:,} | {size / GIB:.3f} | {temp / GIB:.3f} | {temp / size:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
