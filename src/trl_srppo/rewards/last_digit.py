# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The verifier of the toy task (`trl_srppo.toy`): is the completion's first word the prompt's last digit?"""

from trl_srppo.rewards._registry import register_reward


@register_reward("last_digit")
def last_digit_reward(completions, answer, **kwargs) -> list[float]:
    """1.0 when the first word of the completion is the gold digit, else 0.0 (also for an empty completion).

    Completions are strings or conversational message lists (the text of the last message is read)."""
    rewards = []
    for completion, gold in zip(completions, answer, strict=True):
        if isinstance(completion, list):
            completion = completion[-1]["content"] if completion else ""
        words = completion.split()
        rewards.append(1.0 if words and words[0] == str(gold) else 0.0)
    return rewards
