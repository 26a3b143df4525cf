# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The settings of a pass@k evaluation: [`EvalConfig`], the options of `trl-srppo eval` (a YAML `--config` file and
`--key value` flags, parsed like `trl-srppo train`; the names are the training ones where the idea is the same)."""

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .benchmarks import BENCHMARKS, Benchmark, get_benchmark, register_benchmark
from .sampling import SamplingConfig

__all__ = ["EvalConfig", "config_to_dict", "default_ks", "json_mapping"]

ENGINES = ("auto", "vllm", "transformers")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def json_mapping(value: Any, name: str, example: str) -> dict:
    """`value` as a dict: `None` is `{}`, a string is parsed as JSON; a `ValueError` naming `name` otherwise."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(f"{name} is not valid JSON ({err}); give a JSON object, e.g. {example}.") from err
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a mapping (a JSON object on the command line), e.g. {example}.")
    return dict(value)


@dataclass
class EvalConfig:
    r"""
    Settings of a pass@k evaluation (the options of `trl-srppo eval`).

    Args:
        model_name_or_path (`str`):
            Hub id, local model folder, training output folder, or LoRA adapter folder (see
            [`~evaluation.models.resolve_model`]).
        benchmarks (`list[str]`):
            Registered benchmark names (see [`~evaluation.benchmarks.list_benchmarks`]); may be empty when
            `dataset_name` is given.
        dataset_name (`str`, *optional*):
            A user's own problems: a local json/jsonl/parquet file or a Hub dataset name, in the format `trl-srppo
            train --dataset_name` takes for the same `task`. Evaluated beside `benchmarks`, under `dataset_label`.
        task (`str`, *optional*):
            The task of `dataset_name` (required with it): a name `trl-srppo train --task` takes (`math`,
            `countdown`, `knights_knaves`, `multiple_choice`, `arithmetic`, `chain`); it sets the fields read, the
            prompt and the verifier.
        dataset_config (`str`, *optional*):
            Hub configuration of `dataset_name`.
        dataset_split (`str`, *optional*, defaults to `"test"`):
            Hub split of `dataset_name` (a local file is read whole).
        dataset_label (`str`, *optional*):
            The name of `dataset_name` in tables, plots, logs and the sample files; defaults to the file's stem or the
            Hub dataset's last part. It must not be a registered benchmark's name.
        output_dir (`str`):
            Folder of the samples and reports; reused (resumed) when it already holds samples.
        num_generations (`int`, *optional*, defaults to `16`):
            Samples per problem (the `n` of pass@k).
        ks (`list[int]`, *optional*):
            Values of k to report; each at most `num_generations`. Defaults to the powers of two up to
            `num_generations` (and `num_generations` itself).
        temperature (`float`, *optional*, defaults to `0.6`):
            Sampling temperature.
        top_p (`float`, *optional*, defaults to `0.95`):
            Nucleus sampling mass.
        top_k (`int`, *optional*, defaults to `-1`):
            Top-k sampling, `-1` to disable.
        max_completion_length (`int`, *optional*, defaults to `4096`):
            Maximum completion length in tokens.
        seed (`int`, *optional*, defaults to `0`):
            Base seed of the sampling.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Wrap prompts with the tokenizer's chat template (plain text when the tokenizer has none).
        chat_template_kwargs (`dict`, *optional*):
            Extra variables of the chat template, e.g. `{"enable_thinking": false}` for Qwen3 (JSON on the command
            line).
        enable_thinking (`bool`, *optional*):
            Shortcut for `chat_template_kwargs["enable_thinking"]` (Qwen3-style templates).
        system_prompt (`str`, *optional*):
            System message prepended to every prompt.
        data_dir (`str`, *optional*):
            Folder searched for the benchmarks' local files (e.g. a folder holding `math500.jsonl`); the Hub is used
            for the others.
        data_files (`dict[str, str]`, *optional*):
            Benchmark name -> local json/jsonl/parquet file or Hub dataset name, overriding `data_dir` and the
            registry's Hub name (JSON on the command line, e.g. `{"gpqa_diamond": "gpqa.jsonl"}`). Tables and plots
            name such a benchmark with its source, e.g. `gpqa_diamond (file: gpqa.jsonl)`.
        max_problems (`int`, *optional*):
            Evaluate only the first `max_problems` problems of each benchmark.
        engine (`str`, *optional*, defaults to `"auto"`):
            `"auto"` (vLLM when installed with CUDA, transformers otherwise), `"vllm"` or `"transformers"`.
        batch_size (`int`, *optional*, defaults to `64`):
            Transformers engine: maximum sequences per `generate` call; the progress bar moves after each, with the
            rate (completions/s, tokens/s) since generation began.
        chunk_size (`int`, *optional*, defaults to `32`):
            Problems per engine call; samples are written to disk after each chunk.
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weight dtype (`auto`, `float32`, `bfloat16`, `float16`).
        device (`str`, *optional*, defaults to `"auto"`):
            Transformers engine device.
        model_revision (`str`, *optional*):
            Hub revision (branch, tag, commit) of the model.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom code from the Hub.
        vllm_tensor_parallel_size (`int`, *optional*, defaults to `1`):
            vLLM: number of GPUs.
        vllm_gpu_memory_utilization (`float`, *optional*, defaults to `0.9`):
            vLLM: fraction of GPU memory to use.
        vllm_max_model_length (`int`, *optional*):
            vLLM: context length (default: the model's).
        rescore (`bool`, *optional*, defaults to `False`):
            Re-verify every stored sample.
        overwrite (`bool`, *optional*, defaults to `False`):
            Delete stored samples whose generation settings differ from this run's instead of refusing to run.
        label (`str`, *optional*):
            Name of the model in tables and plots; defaults to the model folder's or Hub id's last part.
        plot (`bool`, *optional*, defaults to `True`):
            Write `pass_at_k.png`.
        progress (`bool`, *optional*, defaults to `True`):
            Show progress bars.
    """

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Hub id, local model folder, training output folder (latest checkpoint-* when it has no final "
            "model), or LoRA adapter folder."
        },
    )
    benchmarks: list[str] = field(
        default_factory=list, metadata={"help": "Registered benchmarks (see --list_benchmarks)."}
    )
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "Your own problems: a local json/jsonl/parquet file or a Hub dataset (needs --task)."},
    )
    task: str | None = field(
        default=None, metadata={"help": "The task of --dataset_name, as for `trl-srppo train --task` (e.g. math)."}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub configuration of --dataset_name."})
    dataset_split: str = field(default="test", metadata={"help": "Hub split of --dataset_name."})
    dataset_label: str | None = field(
        default=None, metadata={"help": "Name of --dataset_name in reports (default: the file's stem)."}
    )
    output_dir: str | None = field(
        default=None, metadata={"help": "Folder of the samples and reports (reused when it exists)."}
    )
    num_generations: int = field(default=16, metadata={"help": "Samples per problem (the n of pass@k)."})
    ks: list[int] | None = field(
        default=None, metadata={"help": "Values of k to report (default: powers of two up to n, and n)."}
    )
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling mass."})
    top_k: int = field(default=-1, metadata={"help": "Top-k sampling, -1 to disable."})
    max_completion_length: int = field(default=4096, metadata={"help": "Completion length limit in tokens."})
    seed: int = field(default=0, metadata={"help": "Base random seed."})
    use_chat_template: bool = field(
        default=True, metadata={"help": "Wrap prompts with the chat template (--no_use_chat_template: plain text)."}
    )
    chat_template_kwargs: dict | str | None = field(
        default=None, metadata={"help": 'Chat template variables as JSON, e.g. \'{"reasoning_effort": "low"}\'.'}
    )
    enable_thinking: bool | None = field(
        default=None, metadata={"help": "Pass enable_thinking=True/False to the chat template (Qwen3-style)."}
    )
    system_prompt: str | None = field(default=None, metadata={"help": "System message prepended to every prompt."})
    data_dir: str | None = field(
        default=None, metadata={"help": "Folder with the benchmarks' local files (others come from the Hub)."}
    )
    data_files: dict | str | None = field(
        default=None,
        metadata={"help": 'Benchmark -> local file or Hub dataset, JSON, e.g. \'{"gpqa_diamond": "gpqa.jsonl"}\'.'},
    )
    max_problems: int | None = field(default=None, metadata={"help": "Only the first N problems of each benchmark."})
    engine: str = field(
        default="auto", metadata={"help": "auto (vLLM with CUDA, else transformers), vllm, transformers."}
    )
    batch_size: int = field(default=64, metadata={"help": "Transformers engine: sequences per generate call."})
    chunk_size: int = field(default=32, metadata={"help": "Problems per engine call; samples are saved after each."})
    dtype: str = field(default="auto", metadata={"help": "Weight dtype: auto, float32, bfloat16 or float16."})
    device: str = field(default="auto", metadata={"help": "Transformers engine device (default: cuda if available)."})
    model_revision: str | None = field(default=None, metadata={"help": "Hub revision (branch, tag, commit)."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow custom model code from the Hub."})
    vllm_tensor_parallel_size: int = field(default=1, metadata={"help": "vLLM: number of GPUs."})
    vllm_gpu_memory_utilization: float = field(default=0.9, metadata={"help": "vLLM: fraction of GPU memory."})
    vllm_max_model_length: int | None = field(default=None, metadata={"help": "vLLM: context length."})
    rescore: bool = field(default=False, metadata={"help": "Re-verify every stored sample."})
    overwrite: bool = field(
        default=False, metadata={"help": "Delete stored samples generated with different settings."}
    )
    label: str | None = field(default=None, metadata={"help": "Model name in tables and plots."})
    plot: bool = field(default=True, metadata={"help": "Write pass_at_k.png (--no_plot: do not)."})
    progress: bool = field(default=True, metadata={"help": "Show progress bars (--no_progress: do not)."})

    def __post_init__(self):
        example = '{"enable_thinking": false}'
        self.chat_template_kwargs = json_mapping(self.chat_template_kwargs, "chat_template_kwargs", example)
        if self.enable_thinking is not None:
            self.chat_template_kwargs["enable_thinking"] = self.enable_thinking
        self.data_files = json_mapping(self.data_files, "data_files", '{"gpqa_diamond": "gpqa.jsonl"}')
        if self.num_generations < 1:
            raise ValueError(f"num_generations must be at least 1, got {self.num_generations}.")
        if self.max_problems is not None and self.max_problems < 1:
            raise ValueError(f"max_problems must be at least 1 (or unset for every problem), got {self.max_problems}.")
        self.ks = sorted(set(self.ks)) if self.ks else default_ks(self.num_generations)
        bad = [k for k in self.ks if k < 1 or k > self.num_generations]
        if bad:
            raise ValueError(
                f"Every k must be in [1, n={self.num_generations}] (ks: pass@k needs k <= num_generations samples); "
                f"got {bad}."
            )
        if self.chunk_size < 1:
            raise ValueError(
                f"chunk_size (problems per engine call) must be at least 1, got {self.chunk_size}; the default is 32."
            )
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}.")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}.")
        for name in self.benchmarks:
            get_benchmark(name)  # fail early, with the list of registered names
        self._add_own_dataset()
        unknown = sorted(set(self.data_files) - set(self.benchmarks))
        if unknown:
            raise ValueError(f"data_files names benchmarks that are not evaluated: {unknown}.")

    def _add_own_dataset(self) -> None:
        """Register `dataset_name` as a benchmark of `task` under `dataset_label` (for this process) and evaluate it
        with the others; its source goes to `data_files`, so the reports name it with its file or dataset."""
        if self.dataset_name is None:
            if self.task is not None or self.dataset_label is not None:
                raise ValueError(
                    "task and dataset_label describe --dataset_name, which is not set: give --dataset_name (a local "
                    "json/jsonl/parquet file or a Hub dataset) or drop them."
                )
            return
        if self.task is None:
            from ..tasks.registry import TASKS

            raise ValueError(
                f"dataset_name {self.dataset_name!r} needs --task, the task of its rows, one of {sorted(TASKS)} (as "
                "for `trl-srppo train --task`)."
            )
        label = self.dataset_label or _dataset_label(self.dataset_name)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", label):
            raise ValueError(
                f"dataset_label {label!r} names the dataset's sample files: use letters, digits, '.', '_' and '-' "
                "only, e.g. --dataset_label my_set."
            )
        own = Benchmark(
            name=label,
            task=self.task,  # an unknown task name fails here, with the registered ones
            hub_path=self.dataset_name,
            hub_split=self.dataset_split,
            hub_config=self.dataset_config,
            description=f"your own {self.task} problems: {self.dataset_name}",
        )
        if label in BENCHMARKS and BENCHMARKS[label] != own:
            raise ValueError(
                f"dataset_label {label!r} is the name of a registered benchmark; name your dataset otherwise with "
                "--dataset_label."
            )
        register_benchmark(own, overwrite=True)
        if label not in self.benchmarks:
            self.benchmarks = [*self.benchmarks, label]
        self.data_files[label] = self.dataset_name

    def check_complete(self) -> None:
        """Raise a `ValueError` naming the required settings that are missing (model, benchmarks, output folder)."""
        missing = [name for name in ("model_name_or_path", "benchmarks", "output_dir") if not getattr(self, name)]
        if missing:
            raise ValueError(
                f"{', '.join(missing)} required: set them in the --config file or as --key value flags (benchmarks: "
                "registered names, or your own file with --dataset_name and --task)."
            )

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_completion_length,
            seed=self.seed,
        )

    def generation_settings(self) -> dict[str, Any]:
        """The settings that samples depend on: stored samples are reused only when these match."""
        return {
            "model": self.model_name_or_path,
            "revision": self.model_revision,
            "sampling": self.sampling.to_dict(),
            "use_chat_template": self.use_chat_template,
            "chat_template_kwargs": dict(self.chat_template_kwargs),
            "system_prompt": self.system_prompt,
        }


def _dataset_label(dataset_name: str) -> str:
    """A dataset's name in reports: a local file's stem (`data/my_set.jsonl` -> `my_set`) or a Hub dataset's last
    part."""
    from pathlib import PurePath

    from ..tasks.data import is_local_file_name

    if is_local_file_name(dataset_name):
        return PurePath(dataset_name).stem
    return dataset_name.rstrip("/").split("/")[-1]


def default_ks(n: int) -> list[int]:
    """The powers of two up to `n`, plus `n`."""
    ks = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted(set(ks + [n]))


def config_to_dict(config: EvalConfig) -> dict[str, Any]:
    return asdict(config)
