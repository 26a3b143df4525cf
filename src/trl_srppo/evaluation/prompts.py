# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Prompts of the evaluation: the text given to the model for a problem, and its token ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["render_prompt", "tokenize_prompts", "uses_chat_template"]


def render_prompt(
    tokenizer,
    prompt: str,
    system_prompt: str | None = None,
    use_chat_template: bool = True,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> str:
    """
    The text given to the model for one problem.

    Args:
        tokenizer (`transformers.PreTrainedTokenizerBase`):
            The model's tokenizer.
        prompt (`str`):
            The user message.
        system_prompt (`str` or `None`, *optional*):
            System message.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Apply the tokenizer's chat template (with the generation prompt) when it has one.
        chat_template_kwargs (`dict` or `None`, *optional*):
            Extra template variables, e.g. `{"enable_thinking": False}`.

    Returns:
        `str`: the rendered prompt.
    """
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
    return f"{system_prompt}\n\n{prompt}" if system_prompt else prompt


def tokenize_prompts(tokenizer, texts: Sequence[str], chat_template_applied: bool) -> list[list[int]]:
    """
    Token ids of rendered prompts. A chat template already writes the special tokens it needs (BOS included), so they
    are only added by the tokenizer for plain-text prompts.
    """
    encoded = tokenizer(list(texts), add_special_tokens=not chat_template_applied)
    return [list(ids) for ids in encoded["input_ids"]]


def uses_chat_template(tokenizer, use_chat_template: bool) -> bool:
    return bool(use_chat_template and getattr(tokenizer, "chat_template", None))
