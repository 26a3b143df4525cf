# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The output folder of an evaluation: `run_config.json` and the JSONL files of problems and samples."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import EvalConfig

__all__ = ["RUN_CONFIG", "check_run_config", "prompt_sha", "read_jsonl", "write_jsonl"]

RUN_CONFIG = "run_config.json"


def prompt_sha(text: str) -> str:
    """A short hash of a rendered prompt, stored with each sample to detect a changed prompt."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a samples file. A run killed mid-write can leave a partial last line: it is dropped (and the file
    rewritten without it, so that appending goes on from a clean line); that sample is generated again."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    records, damaged = [], False
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            damaged = True
    if damaged or (text and not text.endswith("\n")):
        write_jsonl(path, records)
    return records


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def check_run_config(output_dir: Path, config: EvalConfig) -> None:
    """Write `run_config.json`; refuse (or, with `overwrite`, delete) stored samples of other generation settings."""
    path = output_dir / RUN_CONFIG
    settings = config.generation_settings()
    if path.is_file():
        stored = json.loads(path.read_text(encoding="utf-8")).get("generation")
        if stored is not None and stored != settings:
            if not config.overwrite:
                changed = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
                raise ValueError(
                    f"{output_dir} holds samples generated with other settings (differences in: "
                    f"{', '.join(changed)}). Use another output folder, or pass overwrite=True (--overwrite) to "
                    "delete the stored samples."
                )
            for stale in (output_dir / "samples").glob("*.jsonl"):
                stale.unlink()
    output_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "generation": settings,
        "n": config.num_generations,
        "ks": config.ks,
        "benchmarks": list(config.benchmarks),
        "engine": config.engine,
        "max_problems": config.max_problems,
    }
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
