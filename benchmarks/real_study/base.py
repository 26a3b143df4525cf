# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The SmolLM2 study's base model, measured once and kept in its `runs/base-<key>/` folder: the level selection and
the base model's validation and test numbers, with the evaluation seeds the runs use (`load_base`); and the JSON
writing of a run file (`write_json`)."""

import json
import os

from ..common.runs import torch_threads
from ..smollm2.model import load_model
from .bench import held_out, level_selection
from .design import Study


def measure_base(model_path: str, study: Study, by_level: dict) -> dict:
    """The level selection and the base model's validation and test numbers (the evaluation seeds the runs use)."""
    import torch

    torch.manual_seed(0)
    tokenizer, model = load_model(model_path)
    selection, kept, select_seconds = level_selection(model, tokenizer, study.budget(study.val_samples), by_level)
    rows = {split: [row for level in kept for row in by_level[level][split]] for split in ("val", "test")}
    return {
        "selection": selection,
        "kept": kept,
        "select_seconds": select_seconds,
        "val": held_out(model, tokenizer, rows["val"], study.budget(study.val_samples), seed=1000 + study.updates),
        "test": held_out(model, tokenizer, rows["test"], study.budget(study.test_samples), seed=1000 + study.updates),
    }


def load_base(folder: str, model_path: str, study: Study, by_level: dict) -> dict:
    path = os.path.join(folder, "base.json")
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    with torch_threads(1):
        base = measure_base(model_path, study, by_level)
    write_json(path, base)
    return base


def write_json(path: str, data) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)
