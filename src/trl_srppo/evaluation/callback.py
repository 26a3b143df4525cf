# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A `TrainerCallback` that measures pass@k on a few problems every N optimizer steps during training."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from transformers import TrainerCallback

from ..tasks.registry import is_correct
from .benchmarks import Benchmark, Problem, get_benchmark
from .config import default_ks
from .engines import TransformersEngine
from .pass_at_k import pass_at_k_curve
from .prompts import render_prompt, tokenize_prompts, uses_chat_template
from .sampling import SamplingConfig
from .scoring import score_completions

__all__ = ["PassAtKCallback"]


class PassAtKCallback(TrainerCallback):
    """
    Evaluate pass@k of the model being trained on a small set of problems every `every_n_steps` optimizer steps,
    with the trainer's current model and tokenizer and the transformers engine, and log
    `<metric_prefix>/<benchmark>/pass@<k>` (plus `<metric_prefix>/<benchmark>/mean_reward`).

    How the metrics are logged: when the callback is given the `trainer` (argument or [`~PassAtKCallback.attach`]), it
    calls the base `transformers.Trainer.log` on it, which appends the metrics to `state.log_history` and forwards
    them to every reporting integration (TensorBoard, W&B, ...) through `on_log`. The base method is called on
    purpose: TRL's GRPO trainer overrides `log` to flush its own running averages, which must not be emptied by an
    evaluation in the middle of a logging window. Without a trainer, the metrics are appended to
    `state.log_history` only (with the `step`), which `trainer.state.log_history` and saved checkpoints' trainer
    state expose. Every result is also kept in `self.history` as `(step, metrics)`.

    Generation runs on the main process only (`state.is_world_process_zero`), in eval mode and without touching the
    global random state; it suits single-process and DDP training (with DeepSpeed ZeRO-3 the sharded model cannot
    generate on one process).

    Args:
        benchmark (`str` or [`~evaluation.benchmarks.Benchmark`]):
            The benchmark (gives the prompt template and the verifier).
        problems (sequence of [`~evaluation.benchmarks.Problem`] or `None`, *optional*):
            The problems to evaluate. Alternatively `rows` or `data_file`.
        rows (iterable of `Mapping` or `None`, *optional*):
            Raw rows with the benchmark's fields (e.g. a slice of the benchmark's dataset).
        data_file (`str` or `None`, *optional*):
            Local file (or Hub dataset name) of the benchmark; with neither `problems` nor `rows`, the benchmark's
            default source (its Hub dataset, or its local file in `data_dir`) is used.
        data_dir (`str` or `None`, *optional*):
            Folder searched for the benchmark's local file.
        max_problems (`int`, *optional*, defaults to `8`):
            Number of problems kept from `rows` / `data_file`.
        n (`int`, *optional*, defaults to `8`):
            Samples per problem.
        ks (sequence of `int` or `None`, *optional*):
            Values of k to log; defaults to the powers of two up to `n`.
        every_n_steps (`int`, *optional*, defaults to `100`):
            Evaluate when `state.global_step` is a multiple of this.
        sampling ([`~evaluation.engines.SamplingConfig`] or `None`, *optional*):
            Sampling settings; defaults to temperature 1.0, top-p 1.0, 512 new tokens.
        batch_size (`int`, *optional*, defaults to `64`):
            Maximum sequences per `generate` call.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Apply the tokenizer's chat template when it has one.
        chat_template_kwargs (`dict` or `None`, *optional*):
            Extra chat template variables (e.g. `{"enable_thinking": False}`).
        system_prompt (`str` or `None`, *optional*):
            System message.
        tokenizer (`transformers.PreTrainedTokenizerBase` or `None`, *optional*):
            Tokenizer to use instead of the trainer's `processing_class`.
        trainer (`transformers.Trainer` or `None`, *optional*):
            The trainer to log through (see above).
        eval_on_start (`bool`, *optional*, defaults to `False`):
            Also evaluate at step 0, before training.
        metric_prefix (`str`, *optional*, defaults to `"eval_passk"`):
            Prefix of the logged metric names.
    """

    def __init__(
        self,
        benchmark: str | Benchmark,
        problems: Sequence[Problem] | None = None,
        rows: Iterable[Mapping[str, Any]] | None = None,
        data_file: str | None = None,
        data_dir: str | None = None,
        max_problems: int = 8,
        n: int = 8,
        ks: Sequence[int] | None = None,
        every_n_steps: int = 100,
        sampling: SamplingConfig | None = None,
        batch_size: int = 64,
        use_chat_template: bool = True,
        chat_template_kwargs: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        tokenizer=None,
        trainer=None,
        eval_on_start: bool = False,
        metric_prefix: str = "eval_passk",
    ):
        self.benchmark = get_benchmark(benchmark) if isinstance(benchmark, str) else benchmark
        if problems is not None:
            self.problems = list(problems)
        elif rows is not None:
            self.problems = self.benchmark.build_problems(rows, max_problems=max_problems)
        else:
            self.problems = self.benchmark.load(source=data_file, data_dir=data_dir, max_problems=max_problems)
        if not self.problems:
            raise ValueError("PassAtKCallback needs at least one problem.")
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {every_n_steps}.")
        self.n = n
        self.ks = sorted(set(ks)) if ks else default_ks(n)
        if any(k < 1 or k > n for k in self.ks):
            raise ValueError(f"Every k must be in [1, n={n}], got {self.ks}.")
        self.every_n_steps = every_n_steps
        self.sampling = sampling or SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=512)
        self.batch_size = batch_size
        self.use_chat_template = use_chat_template
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.system_prompt = system_prompt
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.eval_on_start = eval_on_start
        self.metric_prefix = metric_prefix
        self.history: list[tuple[int, dict[str, float]]] = []
        self._reward_func = None

    def attach(self, trainer) -> PassAtKCallback:
        """Log through `trainer` (see the class docstring); returns the callback."""
        self.trainer = trainer
        return self

    # ------------------------------------------------------------------------------------------------------ events

    def on_train_begin(self, args, state, control, **kwargs):
        if self.eval_on_start:
            self._maybe_evaluate(state, kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step > 0 and state.global_step % self.every_n_steps == 0:
            self._maybe_evaluate(state, kwargs)

    # ---------------------------------------------------------------------------------------------------- evaluate

    def _maybe_evaluate(self, state, kwargs) -> None:
        if not getattr(state, "is_world_process_zero", True):
            return
        model = kwargs.get("model")
        tokenizer = self.tokenizer or kwargs.get("processing_class") or kwargs.get("tokenizer")
        if model is None or tokenizer is None:
            raise ValueError("PassAtKCallback needs the trainer's model and tokenizer (processing_class).")
        metrics = self.evaluate(model, tokenizer, seed=self.sampling.seed + state.global_step)
        self.history.append((state.global_step, metrics))
        self._log(state, metrics)

    def evaluate(self, model, tokenizer, seed: int | None = None) -> dict[str, float]:
        """
        Sample `n` completions per problem with `model`, verify them, and return the metrics.

        Args:
            model (`transformers.PreTrainedModel`):
                The model.
            tokenizer (`transformers.PreTrainedTokenizerBase`):
                Its tokenizer.
            seed (`int` or `None`, *optional*):
                Seed of the sampling.

        Returns:
            `dict[str, float]`: `{"<prefix>/<benchmark>/pass@<k>": value, ..., "<prefix>/<benchmark>/mean_reward": r}`.
        """
        engine = TransformersEngine(model, tokenizer, batch_size=self.batch_size)
        templated = uses_chat_template(tokenizer, self.use_chat_template)
        texts = [
            render_prompt(tokenizer, p.prompt, self.system_prompt, templated, self.chat_template_kwargs)
            for p in self.problems
        ]
        outputs = engine.generate(tokenize_prompts(tokenizer, texts, templated), self.n, self.sampling, seed=seed)
        if self._reward_func is None:
            from ..rewards import get_reward_func

            self._reward_func = get_reward_func(self.benchmark.verifier)
        prompts, completions, columns = [], [], []
        for problem, samples in zip(self.problems, outputs):
            for sample in samples:
                prompts.append(problem.prompt)
                completions.append(sample.text)
                columns.append(problem.columns)
        rewards = score_completions(self.benchmark, prompts, completions, columns, reward_func=self._reward_func)
        correct = np.array([is_correct(r) for r in rewards], dtype=np.int64).reshape(len(self.problems), self.n)
        curve = pass_at_k_curve(self.n, correct.sum(axis=1), self.ks)
        base = f"{self.metric_prefix}/{self.benchmark.name}"
        metrics = {f"{base}/pass@{k}": value for k, value in curve.items()}
        metrics[f"{base}/mean_reward"] = float(np.mean([0.0 if r is None else r for r in rewards]))
        return metrics

    def _log(self, state, metrics: dict[str, float]) -> None:
        if self.trainer is not None:
            from transformers import Trainer

            if isinstance(self.trainer, Trainer):
                Trainer.log(self.trainer, dict(metrics))  # the base method, see the class docstring
            else:
                self.trainer.log(dict(metrics))
        else:
            state.log_history.append({**metrics, "step": state.global_step})
