# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Prompts: the text given to the model for a problem (used by evaluation, the training callback and the analyses),
and its token ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["render_prompt", "tokenize_prompts", "uses_chat_template"]


def render_prompt(
    tokenizer,
    prompt: str | Sequence[dict[str, str]],
    system_prompt: str | None = None,
    use_chat_template: bool = True,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> str:
    """
    The text given to the model for one problem.

    Args:
        tokenizer (`transformers.PreTrainedTokenizerBase`):
            The model's tokenizer.
        prompt (`str` or `list[dict]`):
            The user message, or a conversation (`[{"role": ..., "content": ...}]`, the prompts that training builds
            with [`~data.build_prompts`]).
        system_prompt (`str` or `None`, *optional*):
            System message, put first unless the conversation already starts with one.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Apply the tokenizer's chat template (with the generation prompt) when it has one.
        chat_template_kwargs (`dict` or `None`, *optional*):
            Extra template variables, e.g. `{"enable_thinking": False}`.

    Returns:
        `str`: the rendered prompt.
    """
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    if system_prompt and not (messages and messages[0].get("role") == "system"):
        messages.insert(0, {"role": "system", "content": system_prompt})
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
    return "\n\n".join(m["content"] for m in messages)


def tokenize_prompts(tokenizer, texts: Sequence[str], chat_template_applied: bool) -> list[list[int]]:
    """
    Token ids of rendered prompts. A chat template already writes the special tokens it needs (BOS included), so they
    are only added by the tokenizer for plain-text prompts.
    """
    encoded = tokenizer(list(texts), add_special_tokens=not chat_template_applied)
    return [list(ids) for ids in encoded["input_ids"]]


def uses_chat_template(tokenizer, use_chat_template: bool) -> bool:
    return bool(use_chat_template and getattr(tokenizer, "chat_template", None))
