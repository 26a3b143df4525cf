# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The SmolLM2 study's base model, measured once and kept in its `runs/base-<key>/` folder: the level selection and
the base model's validation and test numbers, with the evaluation seeds the runs use (`load_base`); a study command's
start on it, the model, its cache key, the base model and the kept levels' rows (`open_study`); and the JSON writing
of a run file (`write_json`)."""

import json
import os

from ..common.runs import torch_threads
from ..common.study_runner import stage_folder
from ..smollm2.model import load_model, model_id, resolve_model
from .bench import held_out, level_selection
from .design import Study, settings_key, study_splits


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


def open_study(study: Study, model: str | None, output_dir: str, command: str) -> tuple[str, str, dict, dict] | None:
    """The start of `command` (a study's) on `study`: the model's folder (`--model`, `None` for SmolLM2), the runs'
    cache key, the base model (`load_base`, in the `base` stage's folder under `output_dir`) and the kept levels'
    train, validation and test rows, which it prints; `None` when `model` holds no model."""
    model_path = resolve_model(model, command)
    if model_path is None:
        return None
    key = settings_key(study, model_id(model_path))
    by_level = study_splits(study)
    base = load_base(stage_folder(output_dir, "base", key), model_path, study, by_level)
    rows = {split: [r for level in base["kept"] for r in by_level[level][split]] for split in ("train", "val", "test")}
    print(f"{command} {study.name}: kept {base['kept']}; " + ", ".join(f"{k} {len(v)}" for k, v in rows.items()))
    return model_path, key, base, rows


def write_json(path: str, data) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)
