# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo eval`: pass@k evaluation from the command line."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["build_parser", "main"]

EXAMPLES = """examples:
  trl-srppo eval --model Qwen/Qwen3-1.7B --benchmarks aime24 aime25 math500 --n 64 --output-dir runs/eval/qwen3
  trl-srppo eval --model outputs/srppo-run --benchmarks countdown --data-dir ../shared/data --n 16 \\
      --max-new-tokens 1024 --output-dir runs/eval/srppo        (a training folder, with or without a LoRA adapter)
  trl-srppo eval --compare runs/eval/qwen3 runs/eval/srppo --output-dir runs/eval/compare
  trl-srppo eval --list-benchmarks

Re-running with the same --output-dir reuses the stored samples and generates only the missing ones."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `trl-srppo eval`."""
    parser = argparse.ArgumentParser(
        prog="trl-srppo eval",
        description="Pass@k evaluation of a model on registered benchmarks: generates n samples per problem (vLLM on "
        "GPU, transformers otherwise), verifies them, and writes samples (JSONL), summary.json, results.md and a "
        "pass@k plot to the output folder.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_argument_group("what to evaluate")
    what.add_argument(
        "--model",
        help="Hub id, local model folder, training output folder (latest checkpoint-* when it has no final model), "
        "or LoRA adapter folder (adapter_config.json: its base model is loaded and the adapter applied)",
    )
    what.add_argument("--revision", default=None, help="Hub revision (branch, tag, commit) of the model")
    what.add_argument("--benchmarks", nargs="+", default=[], metavar="NAME", help="benchmarks (see --list-benchmarks)")
    what.add_argument("--list-benchmarks", action="store_true", help="list the registered benchmarks and exit")
    what.add_argument(
        "--data-dir",
        default=None,
        help="folder with the benchmarks' local files (e.g. ../shared/data); benchmarks without a file there are "
        "loaded from the Hub",
    )
    what.add_argument(
        "--data-file",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="local json/jsonl/parquet file (or Hub dataset name) of one benchmark; repeatable",
    )
    what.add_argument("--max-problems", type=int, default=None, help="only the first N problems of each benchmark")

    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--n", type=int, default=16, help="samples per problem (default: 16)")
    sampling.add_argument(
        "--k", nargs="+", type=int, default=None, help="values of k to report (default: powers of two up to n, and n)"
    )
    sampling.add_argument("--temperature", type=float, default=0.6, help="sampling temperature (default: 0.6)")
    sampling.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling mass (default: 0.95)")
    sampling.add_argument("--top-k", type=int, default=-1, help="top-k sampling, -1 to disable (default: -1)")
    sampling.add_argument("--max-new-tokens", type=int, default=4096, help="completion length limit (default: 4096)")
    sampling.add_argument("--seed", type=int, default=0, help="base random seed (default: 0)")

    template = parser.add_argument_group("prompt")
    template.add_argument(
        "--no-chat-template", action="store_true", help="give prompts as plain text instead of the chat template"
    )
    thinking = template.add_mutually_exclusive_group()
    thinking.add_argument(
        "--enable-thinking",
        dest="enable_thinking",
        action="store_true",
        default=None,
        help="pass enable_thinking=True to the chat template (Qwen3-style templates)",
    )
    thinking.add_argument(
        "--disable-thinking",
        dest="enable_thinking",
        action="store_false",
        help="pass enable_thinking=False to the chat template",
    )
    template.add_argument(
        "--chat-template-kwargs",
        default=None,
        metavar="JSON",
        help='other chat template variables as a JSON object, e.g. \'{"reasoning_effort": "low"}\'',
    )
    template.add_argument("--system-prompt", default=None, help="system message prepended to every prompt")

    engine = parser.add_argument_group("engine")
    engine.add_argument(
        "--engine",
        choices=("auto", "vllm", "transformers"),
        default="auto",
        help="generation engine; auto = vLLM when installed and CUDA is available, else transformers",
    )
    engine.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))
    engine.add_argument("--device", default="auto", help="transformers engine device (default: cuda if available)")
    engine.add_argument(
        "--batch-size", type=int, default=64, help="transformers engine: sequences per generate call (default: 64)"
    )
    engine.add_argument(
        "--chunk-size",
        type=int,
        default=32,
        help="problems per engine call; samples are saved after each (default: 32)",
    )
    engine.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM: number of GPUs (default: 1)")
    engine.add_argument(
        "--gpu-memory-utilization", type=float, default=0.9, help="vLLM: fraction of GPU memory (default: 0.9)"
    )
    engine.add_argument("--max-model-len", type=int, default=None, help="vLLM: context length (default: the model's)")
    engine.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow custom model/tokenizer code from the Hub (off by default)",
    )

    output = parser.add_argument_group("output")
    output.add_argument("--output-dir", help="folder of the samples and reports (reused when it exists)")
    output.add_argument("--label", default=None, help="model name in tables and plots")
    output.add_argument("--rescore", action="store_true", help="re-verify every stored sample")
    output.add_argument(
        "--overwrite", action="store_true", help="delete stored samples generated with different settings"
    )
    output.add_argument("--no-plot", action="store_true", help="do not write pass_at_k.png")
    output.add_argument("--no-progress", action="store_true", help="no progress bars")
    output.add_argument(
        "--compare",
        nargs="+",
        default=None,
        metavar="SUMMARY",
        help="instead of evaluating: put several runs (summary.json files or run folders) in one table and plot, "
        "written to --output-dir; runs with the same label (seeds) are shown as mean ± std",
    )
    output.add_argument("--labels", nargs="+", default=None, help="with --compare: one label per run")
    return parser


def _list_benchmarks() -> str:
    from .benchmarks import BENCHMARKS

    lines = ["registered benchmarks:"]
    for name in sorted(BENCHMARKS):
        bench = BENCHMARKS[name]
        source = bench.hub_path + (f" ({bench.hub_config})" if bench.hub_config else "") + f" [{bench.hub_split}]"
        lines.append(f"  {name:<15} verifier={bench.verifier:<16} hub={source}  file={bench.local_file}")
        if bench.description:
            lines.append(f"  {'':<15} {bench.description}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `trl-srppo eval`; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    if args.list_benchmarks:
        print(_list_benchmarks())
        return 0
    if args.compare:
        if not args.output_dir:
            parser.error("--compare needs --output-dir")
        from .report import compare_runs, markdown_table

        paths = compare_runs(args.compare, args.output_dir, labels=args.labels)
        print(markdown_table(args.compare, labels=args.labels))
        print(f"wrote {paths['table']} and {paths['plot']}")
        return 0
    if not args.model or not args.benchmarks or not args.output_dir:
        parser.error("--model, --benchmarks and --output-dir are required (or --list-benchmarks / --compare)")

    chat_template_kwargs = {}
    if args.chat_template_kwargs:
        try:
            chat_template_kwargs = json.loads(args.chat_template_kwargs)
        except json.JSONDecodeError as error:
            parser.error(f"--chat-template-kwargs is not valid JSON: {error}")
        if not isinstance(chat_template_kwargs, dict):
            parser.error("--chat-template-kwargs must be a JSON object")
    if args.enable_thinking is not None:
        chat_template_kwargs["enable_thinking"] = args.enable_thinking
    data_files = {}
    for item in args.data_file:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--data-file expects NAME=PATH, got {item!r}")
        data_files[name] = path

    from .config import EvalConfig
    from .runner import evaluate

    try:
        config = EvalConfig(
            model=args.model,
            benchmarks=args.benchmarks,
            output_dir=args.output_dir,
            n=args.n,
            ks=args.k,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            use_chat_template=not args.no_chat_template,
            chat_template_kwargs=chat_template_kwargs,
            system_prompt=args.system_prompt,
            data_dir=args.data_dir,
            data_files=data_files,
            max_problems=args.max_problems,
            engine=args.engine,
            batch_size=args.batch_size,
            chunk_size=args.chunk_size,
            dtype=args.dtype,
            device=args.device,
            revision=args.revision,
            trust_remote_code=args.trust_remote_code,
            tensor_parallel_size=args.tensor_parallel_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            rescore=args.rescore,
            overwrite=args.overwrite,
            label=args.label,
            plot=not args.no_plot,
            progress=not args.no_progress,
        )
    except (KeyError, ValueError) as error:
        parser.error(str(error).strip("'\""))
    summary = evaluate(config)
    from .report import markdown_table

    print(markdown_table([summary]))
    print(f"wrote {args.output_dir}/summary.json, results.md" + ("" if args.no_plot else ", pass_at_k.png"))
    return 0
