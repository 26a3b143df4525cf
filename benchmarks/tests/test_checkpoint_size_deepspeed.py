# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`benchmarks.costs.checkpoint_size` against a DeepSpeed engine's checkpoint: ZeRO-2 and -3 over one process, in
float32 and bfloat16, on the one-process gloo group of the library's DeepSpeed tests."""

import glob
import os

import pytest
import torch
from torch import nn

from benchmarks.costs.checkpoint_size import DTYPE_BYTES, deepspeed_engine_bytes
from tests.test_critic_deepspeed import NO_DEEPSPEED, one_process_group  # noqa: F401 (the fixture, used by name)
from trl_srppo.method.critics.deepspeed_engine import engine_config


@pytest.mark.usefixtures("one_process_group")
@pytest.mark.parametrize(("stage", "bf16"), [(2, False), (2, True), (3, True)])
def test_an_engine_checkpoint_holds_the_bytes_that_checkpoint_size_counts(tmp_path, stage, bf16):
    pytest.importorskip("deepspeed", reason=NO_DEEPSPEED)
    from trl_srppo.method.critics.deepspeed_engine import ENGINE_FOLDER, save_checkpoint, wrap_critic

    module = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 64))  # 82k parameters: the tensors outweigh headers
    parameters = sum(p.numel() for p in module.parameters())
    optimizer = torch.optim.AdamW(module.parameters(), lr=0.1, weight_decay=0.0)
    config = engine_config(None, zero_stage=stage, micro_batch_size=1, world_size=1, max_grad_norm=None, bf16=bf16)
    engine = wrap_critic(module, optimizer, config)
    dtype = torch.bfloat16 if bf16 else torch.float32
    engine.backward(engine(torch.randn(2, 256, dtype=dtype)).float().sum())
    engine.step()
    save_checkpoint(engine, str(tmp_path))

    files = glob.glob(os.path.join(tmp_path, ENGINE_FOLDER, "*", "*.pt"))
    size = sum(os.path.getsize(f) for f in files)
    predicted = deepspeed_engine_bytes(parameters, stage, DTYPE_BYTES["bfloat16" if bf16 else "float32"])
    assert predicted <= size <= predicted + 32 * 1024, (files, size, predicted)
