# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Verifiable reward functions with TRL's reward-function signature, and their registry.

Every reward is called as ``func(prompts, completions, **kwargs)`` and returns one ``float`` (1.0 or 0.0) per
completion, or None where the example cannot be scored (its gold answer is missing or malformed). Completions are
strings or conversational message lists; dataset columns arrive as keyword lists with one value per completion.

Registered names (``REWARD_FUNCS``) and the columns they read:

- ``math``: ``answer`` (gold answer string), checked with math-verify in time-limited worker processes.
- ``countdown``: ``nums`` (list of ints) and ``target`` (int).
- ``knights_knaves``: ``solution`` (list of bools, True = knight) and ``names`` (list of str).
- ``multiple_choice``: ``answer`` (gold letter).
- ``number``: ``answer`` (a number): the number after the last "=" / "is", else the last number (small chat models'
  plain answers, the ``arithmetic`` task).
- ``chain``: ``answer`` (gold running values), the chain task's verifier (the CPU toy family of `trl_srppo.tasks.toy`,
the
  tests' and the benchmarks' task).

``get_reward_func(name)`` also imports a user's own function from ``package.module:function``.

Each registered function also carries ``answer_format`` (where it reads the answer, in words) and ``extract_answer``
(its extraction step); ``unreadable(func, completions, **columns)`` tells which completions hold no answer it can read
(see ``docs/rewards.md``).
"""

from trl_srppo.rewards import chain, countdown, knights_knaves, math, multiple_choice, number
from trl_srppo.rewards._registry import (
    REWARD_FUNCS,
    get_reward_func,
    get_reward_funcs,
    register_reward,
    unreadable,
)
from trl_srppo.rewards.chain import chain_reward
from trl_srppo.rewards.countdown import countdown_reward
from trl_srppo.rewards.knights_knaves import knights_knaves_reward
from trl_srppo.rewards.math import math_reward
from trl_srppo.rewards.multiple_choice import multiple_choice_reward
from trl_srppo.rewards.number import number_reward

__all__ = [
    "REWARD_FUNCS",
    "chain",
    "chain_reward",
    "countdown",
    "countdown_reward",
    "get_reward_func",
    "get_reward_funcs",
    "knights_knaves",
    "knights_knaves_reward",
    "math",
    "math_reward",
    "multiple_choice",
    "multiple_choice_reward",
    "number",
    "number_reward",
    "register_reward",
    "unreadable",
]
