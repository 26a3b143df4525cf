# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmark's data: prompts of the `chain` task of `trl_srppo.tasks` (chains of digit operations), generated
deterministically from a seed. The task (prompt, row checks, verifier `chain`) is defined in the package; this module
says where its rows come from.

A prompt is a start digit followed by `n` steps, each an operator and a digit, then `=`. The completion is the running
value after every step:

    prompt      7 max 5 min 3 max 9 =          (the default operators: running max / min)
    completion  7 3 9 <eos>

    prompt      7 + 5 * 3 - 9 =                (modular arithmetic, `+ - *` mod 10)
    completion  2 6 7 <eos>

The answer is `n` tokens, so it spans several tokens and an early slip spoils every later one (token-level credit
matters). The verifier gives 1.0 only when the completion is exactly the chain of running values. The number of steps
`n` sets the difficulty: a policy that gets each step right with probability `p` solves the prompt with probability
about `p ** n`.

Three disjoint prompt sets come from one seed: `train` (RL prompts and the warm start's demonstrations), `val`
(hyperparameter selection) and `test` (the reported numbers, never trained or tuned on).
"""

import random
from dataclasses import dataclass

from trl_srppo.rewards.chain import OPERATORS, chain_reward, solve
from trl_srppo.tasks import get_task

__all__ = ["OPERATORS", "TaskSpec", "chain_reward", "make_split", "make_splits", "num_steps", "random_prompt", "solve"]

CHAIN = get_task("chain")
SPECIAL_TOKENS = ("<pad>", "<eos>")
WORDS = tuple(str(d) for d in range(10)) + OPERATORS + ("=",)


@dataclass(frozen=True)
class TaskSpec:
    """The shape of the task family.

    Args:
        min_steps (`int`): fewest steps in a prompt (easiest prompts).
        max_steps (`int`): most steps in a prompt (hardest prompts).
        operators (`tuple[str, ...]`): the operators prompts draw from (a subset of `OPERATORS`). The default,
            running max / min, is one a two-layer model learns partly in a short warm start; the modular `+ - *`
            chains need thousands of supervised steps before a tiny model learns them at all (measured: a sudden
            jump from about 20% to 90% pass@1 between 2,000 and 2,500 steps), so they are kept for other uses.
    """

    min_steps: int = 1
    max_steps: int = 6
    operators: tuple[str, ...] = ("max", "min")

    @property
    def max_completion_tokens(self) -> int:
        """Answer tokens of the longest chain plus the end-of-sequence token."""
        return self.max_steps + 1


def num_steps(prompt: str) -> int:
    """Number of steps of a chain prompt."""
    return (len(prompt.split()) - 2) // 2


def random_prompt(rng: random.Random, steps: int, operators: tuple[str, ...] = OPERATORS) -> str:
    """A prompt with `steps` steps drawn from `rng`."""
    words = [str(rng.randrange(10))]
    for _ in range(steps):
        words += [rng.choice(operators), str(rng.randrange(10))]
    return " ".join(words + ["="])


def make_split(
    num_prompts: int, spec: TaskSpec, seed: int, exclude: set[str] | frozenset = frozenset(), distinct: bool = True
) -> list[dict]:
    """`num_prompts` prompts (`distinct` ones unless told otherwise), step counts spread evenly over `spec`, none of
    them in `exclude`.

    Returns rows `{"prompt", "answer", "steps"}`; the same arguments always give the same rows.
    """
    rng = random.Random(seed)
    levels = list(range(spec.min_steps, spec.max_steps + 1))
    seen, rows = set(exclude), []
    attempts = 0
    while len(rows) < num_prompts:
        attempts += 1
        if attempts > 1000 * num_prompts + 10_000:
            raise ValueError(f"cannot draw {num_prompts} distinct prompts from {spec} outside the excluded ones")
        steps = levels[len(rows) % len(levels)]
        prompt = random_prompt(rng, steps, spec.operators)
        if prompt in seen:
            continue
        if distinct:
            seen.add(prompt)
        prepared = CHAIN.prepare({"chain": prompt, "answer": solve(prompt)})
        rows.append({"prompt": CHAIN.render(prepared), "answer": prepared["answer"], "steps": steps})
    rng.shuffle(rows)
    return rows


def make_splits(spec: TaskSpec, seed: int, num_train: int, num_val: int, num_test: int) -> dict[str, list[dict]]:
    """Disjoint `train`, `val` and `test` prompt sets from one seed (test first, so it never depends on the others).

    Held-out prompts are distinct; training prompts may repeat (the short chains have only a few hundred prompts).
    """
    test = make_split(num_test, spec, seed=seed * 3 + 1)
    val = make_split(num_val, spec, seed=seed * 3 + 2, exclude={r["prompt"] for r in test})
    held_out = {r["prompt"] for r in test} | {r["prompt"] for r in val}
    train = make_split(num_train, spec, seed=seed * 3 + 3, exclude=held_out, distinct=False)
    return {"train": train, "val": val, "test": test}
