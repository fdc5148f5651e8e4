"""The GRPO choices a recipe names, as plain values importable without JAX (the config schema reads
them when it loads a YAML recipe, which must not start JAX)."""

from __future__ import annotations

from typing import Literal, get_args

CreditMode = Literal["team", "team_local"]  # the config's `grpo.credit`
CREDIT_MODES: tuple[str, ...] = get_args(CreditMode)

AggregationMode = Literal["seq_mean_token_mean", "token_mean", "fixed_length"]  # `grpo.aggregation`
AGGREGATION_MODES: tuple[str, ...] = get_args(AggregationMode)
