# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark's data: prompts of the `chain` task of `trl_srppo.tasks.registry` (chains of digit operations),
generated deterministically from a seed. The task (prompt, row checks, verifier `chain`) is defined in the package and
its row generator lives with the rest of the CPU toy family in `trl_srppo.tasks.toy` (read its docstring for the
prompts and their answers); this module names what the benchmark draws from it.

Three disjoint prompt sets come from one seed (`make_splits`): `train` (RL prompts and the warm start's
demonstrations), `val` (hyperparameter selection) and `test` (the reported numbers, never trained or tuned on). The
benchmark's default `TaskSpec()` has one to six running max / min steps.
"""

from trl_srppo.tasks.toy import (
    OPERATORS,
    SPECIAL_TOKENS,
    WORDS,
    TaskSpec,
    chain_reward,
    make_split,
    make_splits,
    num_steps,
    random_prompt,
    solve,
)

__all__ = [
    "OPERATORS",
    "SPECIAL_TOKENS",
    "WORDS",
    "TaskSpec",
    "chain_reward",
    "make_split",
    "make_splits",
    "num_steps",
    "random_prompt",
    "solve",
]
