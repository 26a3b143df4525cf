# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What `SRPPOTrainer` adds to TRL's model card: the paper it cites ([`PAPER`]), the SR-PPO settings and the training
recipe ([`append_srppo_card`])."""

import os
import textwrap

__all__ = ["PAPER", "RECIPE_FILE", "append_srppo_card"]

RECIPE_FILE = "recipe.yaml"  # written to the output folder by `trl-srppo train`, quoted in the model card

# TRL's `_paper` of a trainer: the model card's citation.
PAPER = {
    "title": "Learning with a Single Rollout via Monte Carlo Pass@k Critic",
    "id": "2606.25451",
    # docstyle-ignore
    "citation": textwrap.dedent("""\
        @article{che2026single,
            title        = {{Learning with a Single Rollout via Monte Carlo Pass@k Critic}},
            author       = {Fengdi Che and Yang Liu and Lei Yu and Meng Cao and Tong Che and
                            Rupam Mahmood and Dale Schuurmans},
            year         = 2026,
            eprint       = {arXiv:2606.25451},
        }"""),
}


def append_srppo_card(args, critic_subfolder: str) -> None:
    """Append to `<args.output_dir>/README.md` (TRL's card) the SR-PPO settings of `args` and, when the run came from a
    recipe (`RECIPE_FILE` in the output folder), the recipe with the command line's overrides applied."""
    lines = [
        "",
        "## SR-PPO settings",
        "",
        f"- method: `{args.srppo_method}`; Pass@k weight k = {args.pass_at_k}; GAE lambda = {args.gae_lambda}",
        f"- critic: `{args.critic_type}`, `{args.critic_head}` head, `{args.critic_loss_type}` loss, learning rate "
        f"{args.critic_learning_rate}"
        + ("" if args.critic_head_learning_rate is None else f" (value head {args.critic_head_learning_rate})")
        + f"; weights in the `{critic_subfolder}/` folder of this repository",
        f"- rollouts per prompt: {args.num_generations}",
    ]
    recipe = os.path.join(args.output_dir, RECIPE_FILE)
    if os.path.isfile(recipe):
        with open(recipe, encoding="utf-8") as f:
            text = f.read().rstrip()
        lines += ["", "## Training recipe", "", "The recipe with the command line's overrides applied", ""]
        lines += [f"(`{RECIPE_FILE}`):", "", "```yaml", text, "```"]
    with open(os.path.join(args.output_dir, "README.md"), "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
