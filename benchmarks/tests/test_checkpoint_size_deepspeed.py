# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`benchmarks.costs.checkpoint_size` against a DeepSpeed engine's checkpoint: ZeRO-2 and -3 over one process, in
float32 and bfloat16.

The engines train in a process of their own, on a one-process gloo group: DeepSpeed keeps the groups it derives from
the first process group it sees, so a second group in the test process (the library's DeepSpeed tests hold one per
module) would break the other's engines."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import script_env

ROOT = Path(__file__).resolve().parents[2]
NO_DEEPSPEED = "DeepSpeed is not installed (`pip install trl-srppo[deepspeed]`)"
CASES = [(2, False), (2, True), (3, True)]

# One engine per case: a two-layer module of 82k parameters (the tensors outweigh the files' headers), one step,
# saved; prints, per case, the bytes of its `*.pt` files and the bytes `deepspeed_engine_bytes` predicts.
CHILD = """
import glob, json, os, sys, tempfile
import torch
import torch.distributed as dist
from torch import nn
from benchmarks.costs.checkpoint_size import DTYPE_BYTES, deepspeed_engine_bytes
from trl_srppo.method.critics.deepspeed_engine import ENGINE_FOLDER, engine_config, save_checkpoint, wrap_critic

os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")  # as torchrun sets them
dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
out = []
for stage, bf16 in json.loads(sys.argv[1]):
    module = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 64))
    parameters = sum(p.numel() for p in module.parameters())
    optimizer = torch.optim.AdamW(module.parameters(), lr=0.1, weight_decay=0.0)
    config = engine_config(None, zero_stage=stage, micro_batch_size=1, world_size=1, max_grad_norm=None, bf16=bf16)
    engine = wrap_critic(module, optimizer, config)
    dtype = torch.bfloat16 if bf16 else torch.float32
    engine.backward(engine(torch.randn(2, 256, dtype=dtype)).float().sum())
    engine.step()
    with tempfile.TemporaryDirectory() as folder:
        save_checkpoint(engine, folder)
        files = glob.glob(os.path.join(folder, ENGINE_FOLDER, "*", "*.pt"))
        size = sum(os.path.getsize(f) for f in files)
    predicted = deepspeed_engine_bytes(parameters, stage, DTYPE_BYTES["bfloat16" if bf16 else "float32"])
    out.append({"stage": stage, "bf16": bf16, "files": len(files), "size": size, "predicted": predicted})
dist.destroy_process_group()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def engine_checkpoints() -> dict:
    """Every case of `CASES` trained and saved in one child process: `(stage, bf16)` -> its sizes."""
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    env = script_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-c", CHILD, json.dumps(CASES)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return {(c["stage"], c["bf16"]): c for c in json.loads(result.stdout.strip().splitlines()[-1])}


@pytest.mark.parametrize(("stage", "bf16"), CASES)
def test_an_engine_checkpoint_holds_the_bytes_that_checkpoint_size_counts(engine_checkpoints, stage, bf16):
    case = engine_checkpoints[(stage, bf16)]
    assert case["files"] and case["predicted"] <= case["size"] <= case["predicted"] + 32 * 1024, case
