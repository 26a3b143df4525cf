# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A run's checkpoint folders: which are complete, which one a resume takes, and what a resume on another number of
processes restores.

A checkpoint is complete only once [`CHECKPOINT_COMPLETE`] is written in it, after every other file, on every process,
and before older checkpoints are rotated away (`trl_srppo.runtime.resume.ReliableTrainerMixin` writes it).
[`last_complete_checkpoint`] picks the newest complete one and logs the incomplete ones it skips (a run killed while
saving leaves one); [`resolve_resume_checkpoint`] is what `resume_from_checkpoint=True` means;
[`check_resume_processes`] gives a clear error where a resume on another number of processes cannot be exact.
"""

import json
import logging
import os
import re
from pathlib import Path

logger = logging.getLogger(__name__)

CHECKPOINT_COMPLETE = "checkpoint_complete.json"  # written last in a checkpoint folder
TRAINER_STATE = "trainer_state.json"  # the Trainer's, written after its other files of a checkpoint
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_RNG_FILE = re.compile(r"^rng_state_\d+\.pth$")  # the Trainer's, one per process in a multi-process run


def checkpoint_step(folder: str) -> int | None:
    """The step of a `checkpoint-<step>` folder name, or `None` for any other name."""
    match = _CHECKPOINT.match(os.path.basename(os.path.normpath(folder)))
    return int(match.group(1)) if match else None


def is_complete_checkpoint(folder: str) -> bool:
    """Whether every file of the checkpoint was written (its completeness marker exists)."""
    return os.path.isfile(os.path.join(folder, CHECKPOINT_COMPLETE))


def mark_checkpoint_complete(
    folder: str, global_step: int, num_processes: int | None = None, per_device_train_batch_size: int | None = None
) -> None:
    """Write the completeness marker, atomically (a temporary file renamed over it), with the global step, and the
    number of processes that wrote the checkpoint and their batch size when given (read by
    [`check_resume_processes`]; a resumed run's `trainer_state.json` keeps the batch size of the run it resumed)."""
    path = os.path.join(folder, CHECKPOINT_COMPLETE)
    content = {"global_step": global_step}
    if num_processes is not None:
        content["num_processes"] = num_processes
    if per_device_train_batch_size is not None:
        content["per_device_train_batch_size"] = per_device_train_batch_size
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(content, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def list_checkpoints(output_dir: str) -> list[str]:
    """The `checkpoint-<step>` folders of `output_dir`, oldest step first."""
    if not os.path.isdir(output_dir):
        return []
    folders = [os.path.join(output_dir, n) for n in os.listdir(output_dir) if _CHECKPOINT.match(n)]
    return sorted((f for f in folders if os.path.isdir(f)), key=checkpoint_step)


def last_complete_checkpoint(output_dir: str) -> str | None:
    """The newest complete checkpoint of `output_dir` (by step), or `None`; logs a warning for every newer,
    incomplete one it skips."""
    checkpoints = list_checkpoints(output_dir)
    skipped = []
    for folder in reversed(checkpoints):
        if is_complete_checkpoint(folder):
            if skipped:
                logger.warning(
                    "Skipping incomplete checkpoint(s) %s (no %s: the run stopped while saving them); resuming from "
                    "%s.",
                    ", ".join(skipped),
                    CHECKPOINT_COMPLETE,
                    folder,
                )
            return folder
        skipped.append(folder)
    return None


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest checkpoint of a training output folder: the newest complete one when the run marks them (a run of
    this package: a newer one without the marker was cut short while saving), else the newest."""
    checkpoints = [Path(p) for p in list_checkpoints(str(folder))]  # oldest step first
    complete = [p for p in checkpoints if is_complete_checkpoint(str(p))]
    if complete and complete[-1] != checkpoints[-1]:
        skipped = ", ".join(p.name for p in checkpoints[checkpoints.index(complete[-1]) + 1 :])
        print(f"[trl-srppo] {folder}: skipping {skipped}, cut short while saving (no completeness marker).")
    return (complete or checkpoints or [None])[-1]


def is_partial_write(folder: str) -> bool:
    """Whether an incomplete checkpoint folder is certainly a save that was cut short: the Trainer writes
    `trainer_state.json` after every other file of its own, so a folder without it never held a whole checkpoint
    (one with it and no completeness marker may be a whole checkpoint written by a Trainer that does not mark them)."""
    return not is_complete_checkpoint(folder) and not os.path.isfile(os.path.join(folder, TRAINER_STATE))


def resolve_resume_checkpoint(output_dir: str) -> str | None:
    """What `resume_from_checkpoint=True` means: the newest complete checkpoint of `output_dir`, or `None` (start from
    the beginning, with a warning) when the run has no checkpoint yet: no folder at all, or only saves cut short
    ([`is_partial_write`], a kill during the first save), so a restart-on-failure loop recovers from a kill before or
    during the first save too. A `ValueError` that says why when the only checkpoints may be whole but are unmarked."""
    folder = last_complete_checkpoint(output_dir)
    if folder is not None:
        return folder
    incomplete = list_checkpoints(output_dir)
    unmarked = [f for f in incomplete if not is_partial_write(f)]
    if unmarked:
        raise ValueError(
            f"No complete checkpoint in {output_dir}: {', '.join(unmarked)} have no {CHECKPOINT_COMPLETE} (a run "
            "stopped while saving them, or they were written by a Trainer that does not mark them). Pass a "
            "checkpoint folder you trust as `resume_from_checkpoint`, or start afresh."
        )
    if incomplete:
        logger.warning(
            "No complete checkpoint in %s: %s were cut short while saving (no %s); resume_from_checkpoint=True starts "
            "from the beginning, and the new run writes them again.",
            output_dir,
            ", ".join(incomplete),
            TRAINER_STATE,
        )
        return None
    logger.warning("No checkpoint in %s yet: resume_from_checkpoint=True starts from the beginning.", output_dir)
    return None


def read_json(path: str) -> dict:
    """The JSON object of the file at `path`; `{}` when there is no file."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def checkpoint_processes(folder: str) -> int | None:
    """The number of processes that wrote a checkpoint: from its completeness marker or, for a checkpoint without one
    (written by a Trainer that does not mark them), from the Trainer's random-number-generator files (`rng_state.pth`
    in one process, `rng_state_<rank>.pth` in each of several); `None` when neither tells."""
    recorded = read_json(os.path.join(folder, CHECKPOINT_COMPLETE)).get("num_processes")
    if recorded is not None:
        return int(recorded)
    names = os.listdir(folder)
    if "rng_state.pth" in names:
        return 1
    return sum(bool(_RNG_FILE.match(name)) for name in names) or None


def check_resume_processes(
    folder: str,
    num_processes: int,
    per_device_train_batch_size: int,
    ignore_data_skip: bool = False,
    deepspeed_config: dict | None = None,
) -> str | None:
    """What resuming `folder` on `num_processes` processes restores: `None` when the checkpoint was written by as many
    processes (or the number is unknown), a warning naming what is not restored when by another number, and a
    `ValueError` naming the fix when the resume cannot be exact.

    On another number of processes, the Trainer restores the policy's weights, optimizer state (whole under DDP) and
    learning-rate schedule, the global step, and the position in the data, which it counts in batches: the last is
    right only when the batch over all processes (`num_processes * per_device_train_batch_size`) is the checkpoint's.
    It does not restore the random number generators (one state per process). A policy under DeepSpeed ZeRO has a
    checkpoint partitioned over the processes that wrote it, which DeepSpeed loads on another number only from its
    universal form.

    Args:
        folder (`str`):
            The checkpoint folder.
        num_processes (`int`):
            Processes of this run.
        per_device_train_batch_size (`int`):
            This run's batch per process.
        ignore_data_skip (`bool`, *optional*, defaults to `False`):
            The Trainer's `ignore_data_skip`: the resumed epoch starts at the beginning of its data, so no batch
            count needs to carry over.
        deepspeed_config (`dict`, *optional*):
            The policy's DeepSpeed config, when it runs under DeepSpeed.
    """
    saved = checkpoint_processes(folder)
    if saved is None or saved == num_processes:
        return None
    saved_batch = read_json(os.path.join(folder, CHECKPOINT_COMPLETE)).get("per_device_train_batch_size")
    if saved_batch is None:  # a checkpoint without the marker
        saved_batch = read_json(os.path.join(folder, TRAINER_STATE)).get("train_batch_size")
    rows = saved * saved_batch if saved_batch else None
    if rows is not None and not ignore_data_skip and rows != num_processes * per_device_train_batch_size:
        if rows % num_processes == 0:
            fix = f"Set per_device_train_batch_size={rows // num_processes} to keep {rows} rows per step"
        else:
            fix = f"Use a number of processes and a per_device_train_batch_size whose product is {rows}"
        raise ValueError(
            f"Checkpoint {folder} was written by {saved} process(es) with per_device_train_batch_size={saved_batch} "
            f"({rows} rows per step over all processes), and this run has {num_processes} with "
            f"per_device_train_batch_size={per_device_train_batch_size} ({num_processes * per_device_train_batch_size}"
            "). The Trainer finds its place in the data by counting batches, so the resumed run would repeat or skip "
            f"prompts. {fix}, or set ignore_data_skip=True to start the current epoch's data again from its "
            "beginning."
        )
    stage = int((deepspeed_config or {}).get("zero_optimization", {}).get("stage", 0))
    universal = bool((deepspeed_config or {}).get("checkpoint", {}).get("load_universal", False))
    if deepspeed_config is not None and stage >= 1 and not universal:
        step = checkpoint_step(folder)
        engine = os.path.join(folder, f"global_step{step}")
        raise ValueError(
            f"Checkpoint {folder} was written by {saved} process(es) and this run has {num_processes}, but the policy "
            f"runs under DeepSpeed ZeRO-{stage}, whose checkpoint ({engine}) is partitioned over the processes that "
            "wrote it. Resume on the same number of processes, or convert it to DeepSpeed's universal checkpoint "
            f"(`python -m deepspeed.checkpoint.ds_to_universal --inject_missing_state --input_folder {engine} "
            f'--output_folder {engine}_universal`) and add `"checkpoint": {{"load_universal": true}}` to the '
            "DeepSpeed config."
        )
    return (
        f"Resuming {folder}, written by {saved} process(es), on {num_processes}: the weights, optimizer states, "
        "learning-rate schedules, global step and place in the data are restored, but not the random number "
        "generators (the checkpoint holds one state per process of the run that wrote it), and each generated "
        "batch's prompts are split over the processes differently, so the completions sampled from here on differ "
        f"from those of an uninterrupted run on {saved} process(es)."
    )
