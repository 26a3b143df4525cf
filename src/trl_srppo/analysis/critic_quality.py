# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Critic quality: does the critic rank correct reasoning above incorrect reasoning?

1. Each solution is split into sentences ([`split_sentences`]); an external judge labels every sentence twice:
   `sentence_correct` (the sentence itself is right) and `state_correct` (the solution is still on a correct track
   after it). [`export_for_labelling`] writes the JSONL file to label, [`read_labelled`] reads it back.
2. A sentence's score is the mean critic value over its tokens. The value at a token is that of the prefix ending
   with it, `V(s_t)`, so a sentence's score reflects the state the sentence leads to.
3. [`within_prompt_auc`]: AUC per prompt (probability that a random positive sentence outscores a random negative
   one, ties counting half), averaged over the prompts that have both classes; the prompts left out are counted.
   [`pooled_auc`]: the same over all sentences of all prompts together.
4. [`values_by_bin`]: mean critic value per difficulty bin next to the bin's empirical success rate.
"""

import json
import os
import re
from dataclasses import dataclass, field

import torch

from ..evaluation.markdown import markdown_table
from ..evaluation.prompts import render_prompt, tokenize_prompts, uses_chat_template
from ..method.batch_metrics import auc
from ..method.core import critic_values
from ..tasks.registry import is_correct
from .config import AnalysisConfig, RolloutAnalysisConfig
from .difficulty import BINS, bin_counts, correct_counts
from .report import bar_figure, histogram_figure, write_outputs
from .rollouts import load_analysis_critic, load_policy, sample_rollouts

LABEL_FIELDS = ("sentence_correct", "state_correct")
# A boundary is a run of `.`, `?` or `!` followed by whitespace or the end of the text, or a newline. A period inside
# a number or a formula (`3.5`, `\frac{1}{2}.5`, `e.g.x`) is not followed by whitespace, so it never splits.
_BOUNDARY = re.compile(r"[.?!]+(?=\s|$)|\n")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split a solution into sentences, deterministically.

    Args:
        text (`str`):
            The solution.

    Returns:
        `list[tuple[int, int]]`: `(start, end)` character spans of the non-empty sentences, in order, with the
        surrounding whitespace trimmed; the ending punctuation belongs to its sentence.
    """
    spans, start = [], 0
    for match in _BOUNDARY.finditer(text):
        end = match.end() if match.group() != "\n" else match.start()
        spans.append((start, end))
        start = match.end()
    spans.append((start, len(text)))
    trimmed = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


def sentence_token_spans(offsets: list[tuple[int, int]], sentences: list[tuple[int, int]]) -> list[list[int]]:
    """Token indices of each sentence: a token belongs to a sentence when their character spans overlap.

    Args:
        offsets (`list[tuple[int, int]]`):
            Character span of every token (a fast tokenizer's `offset_mapping`); empty spans match nothing.
        sentences (`list[tuple[int, int]]`):
            Character spans of the sentences.

    Returns:
        `list[list[int]]`: for each sentence, the indices of its tokens (a token straddling two sentences goes to
        both).
    """
    out = []
    for s, e in sentences:
        out.append([i for i, (a, b) in enumerate(offsets) if b > a and a < e and b > s])
    return out


def within_prompt_auc(groups: list[tuple[list[float], list[int]]]) -> dict:
    """AUC within each prompt, averaged with equal weight over the prompts that have both label classes.

    Args:
        groups (`list[tuple[list[float], list[int]]]`):
            `(scores, labels)` of the sentences of each prompt (all its solutions together).

    Returns:
        `dict`: `mean_auc` (NaN if no prompt is kept), `num_kept`, `num_excluded` (one-class or empty prompts) and
        `per_prompt` (AUC or NaN for each group).
    """
    per_prompt = [auc(s, y) for s, y in groups]
    kept = [a for a in per_prompt if a == a]
    return {
        "mean_auc": sum(kept) / len(kept) if kept else float("nan"),
        "num_kept": len(kept),
        "num_excluded": len(per_prompt) - len(kept),
        "per_prompt": per_prompt,
    }


def pooled_auc(groups: list[tuple[list[float], list[int]]]) -> float:
    """AUC over all sentences of all prompts together."""
    scores = [s for group, _ in groups for s in group]
    labels = [y for _, group in groups for y in group]
    return auc(scores, labels)


def values_by_bin(prompt_values: list[float], prompt_success: list[float], prompt_bins: list[str]) -> dict:
    """Mean critic value and mean empirical success rate of the prompts of each bin.

    Args:
        prompt_values (`list[float]`):
            A critic value per prompt (for example the mean token value over its rollouts).
        prompt_success (`list[float]`):
            Fraction of the prompt's rollouts that are correct.
        prompt_bins (`list[str]`):
            Difficulty bin of each prompt.
    """
    out = {}
    for b in BINS:
        idx = [i for i, pb in enumerate(prompt_bins) if pb == b]
        out[b] = {
            "num_prompts": len(idx),
            "mean_value": sum(prompt_values[i] for i in idx) / len(idx) if idx else float("nan"),
            "success_rate": sum(prompt_success[i] for i in idx) / len(idx) if idx else float("nan"),
        }
    return out


def export_for_labelling(path: str, records: list[dict]) -> int:
    """Write the JSONL file for the external judge, one line per solution.

    Args:
        path (`str`):
            Output file.
        records (`list[dict]`):
            One per solution, with `prompt_id`, `rollout_id`, `prompt`, `prompt_text` (the rendered prompt; optional),
            `chat_template_applied` (whether `prompt_text` was rendered with the chat template; optional),
            `completion`, `reward`, `num_correct`, `num_rollouts` and `bin` (`None` for a prompt without a scorable
            rollout). The sentences are added here as `{"id", "text", "start", "end", "sentence_correct": None,
            "state_correct": None}`; the judge fills the two label fields with booleans.

    Returns:
        `int`: number of sentences written.
    """
    total = 0
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            text = record["completion"]
            sentences = [
                {"id": j, "text": text[s:e], "start": s, "end": e, **dict.fromkeys(LABEL_FIELDS)}
                for j, (s, e) in enumerate(split_sentences(text))
            ]
            total += len(sentences)
            f.write(json.dumps({**record, "sentences": sentences}, ensure_ascii=False) + "\n")
    return total


def read_labelled(path: str) -> list[dict]:
    """Read the labelled JSONL back; labels must be booleans, 0/1 or null (unlabelled). A line that is not a JSON
    object of the export, or a file with no label at all, is an error that says so."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{line_no}: not a JSON line ({err.msg}); the file may be truncated.") from err
            if not isinstance(record, dict) or not isinstance(record.get("sentences"), list):
                raise ValueError(
                    f"{path}:{line_no}: not a record of `trl-srppo analyze critic-export` (no `sentences` list)."
                )
            for sentence in record["sentences"]:
                for name in LABEL_FIELDS:
                    value = sentence.get(name)
                    if value is not None and value not in (True, False, 0, 1):
                        raise ValueError(f"{path}:{line_no}: {name} of sentence {sentence.get('id')} is {value!r}.")
                    sentence[name] = None if value is None else bool(value)
            records.append(record)
    labelled = sum(sentence[name] is not None for r in records for sentence in r["sentences"] for name in LABEL_FIELDS)
    if not labelled:
        raise ValueError(
            f"{path} has no labelled sentence ({' or '.join(LABEL_FIELDS)} set to true or false): label the file that "
            "`trl-srppo analyze critic-export` wrote, then run critic-quality on it."
        )
    return records


@torch.no_grad()
def sentence_scores(
    critic,
    tokenizer,
    prompt_text: str,
    completion: str,
    head: str = "sigmoid",
    chat_template_applied: bool | None = None,
) -> dict:
    """Critic values of a solution's tokens and the mean value of each sentence.

    The prompt is tokenized as the rollouts tokenize it ([`~evaluation.prompts.tokenize_prompts`]: special tokens such
    as BOS are added to a plain-text prompt, not to one rendered with a chat template); the completion is
    re-tokenized with offsets (without special tokens) after it. The value of completion token `t` is the critic's
    output at its own position, `V(s_t)`.

    Args:
        critic (`PreTrainedModel`):
            The critic.
        tokenizer (`PreTrainedTokenizerBase`):
            The policy's tokenizer.
        prompt_text (`str`):
            The rendered prompt ([`~evaluation.prompts.render_prompt`]).
        completion (`str`):
            The solution.
        head (`str`, *optional*, defaults to `"sigmoid"`):
            The critic's head.
        chat_template_applied (`bool` or `None`, *optional*):
            Whether `prompt_text` was rendered with the chat template; `None`: whether the tokenizer has one (what
            `render_prompt` does by default).

    Returns:
        `dict`: `token_values` (list, one per completion token), `prompt_value` (`V(s_0)`, at the last prompt token)
        and `sentence_values` (mean over each sentence's tokens; NaN for a sentence without tokens).
    """
    device = next(critic.parameters()).device
    if chat_template_applied is None:
        chat_template_applied = uses_chat_template(tokenizer, True)
    prompt_ids = tokenize_prompts(tokenizer, [prompt_text], chat_template_applied)[0]  # (P,), as in the rollouts
    enc = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
    ids = torch.tensor([prompt_ids + enc["input_ids"]], device=device)  # (1, P + C)
    raw = critic(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[0, :, 0].float()
    values = critic_values(raw, head).cpu()  # (P + C,)
    token_values = values[len(prompt_ids) :].tolist()
    spans = sentence_token_spans(enc["offset_mapping"], split_sentences(completion))
    sentence_values = [sum(token_values[i] for i in s) / len(s) if s else float("nan") for s in spans]
    return {
        "token_values": token_values,
        "prompt_value": float(values[len(prompt_ids) - 1]) if prompt_ids else float("nan"),
        "sentence_values": sentence_values,
    }


def critic_quality(records: list[dict], critic, tokenizer, head: str = "sigmoid") -> dict:
    """AUCs for both labels and values by difficulty bin, from labelled (or unlabelled) exported records.

    Returns:
        `dict`: for each label field `{within_prompt: ..., pooled_auc, num_labelled}`, and `by_bin` with the mean
        token value, mean `V(s_0)` and success rate per bin.
    """
    by_prompt: dict = {}
    for record in records:
        prompt_text = record.get("prompt_text") or render_prompt(tokenizer, record["prompt"])
        templated = record.get("chat_template_applied") if record.get("prompt_text") else None
        scored = sentence_scores(critic, tokenizer, prompt_text, record["completion"], head, templated)
        entry = by_prompt.setdefault(record["prompt_id"], {"records": [], "scores": []})
        entry["records"].append(record)
        entry["scores"].append(scored)

    out = {}
    for name in LABEL_FIELDS:
        groups, num_labelled = [], 0
        for entry in by_prompt.values():
            scores, labels = [], []
            for record, scored in zip(entry["records"], entry["scores"]):
                for sentence in record["sentences"]:
                    value = scored["sentence_values"][sentence["id"]]
                    if sentence.get(name) is None or value != value:
                        continue
                    scores.append(value)
                    labels.append(int(sentence[name]))
            num_labelled += len(labels)
            groups.append((scores, labels))
        out[name] = {"within_prompt": within_prompt_auc(groups), "pooled_auc": pooled_auc(groups)}
        out[name]["num_labelled"] = num_labelled

    token_means, prompt_values, success, bins = [], [], [], []
    for entry in by_prompt.values():
        tokens = [v for scored in entry["scores"] for v in scored["token_values"]]
        token_means.append(sum(tokens) / len(tokens) if tokens else float("nan"))
        prompt_values.append(sum(s["prompt_value"] for s in entry["scores"]) / len(entry["scores"]))
        rewards = [float(r["reward"]) for r in entry["records"] if r.get("reward") is not None]
        success.append(sum(is_correct(r) for r in rewards) / len(rewards) if rewards else float("nan"))
        bins.append(entry["records"][0].get("bin"))
    out["by_bin"] = {
        "token_value": values_by_bin(token_means, success, bins),
        "prompt_value": values_by_bin(prompt_values, success, bins),
    }
    out["num_prompts"] = len(by_prompt)
    out["num_solutions"] = len(records)
    return out


# ---- the `critic-export` analysis -----------------------------------------------------------------------------------

LABELLING_FILE = "critic_labelling.jsonl"


@dataclass
class CriticExportConfig(RolloutAnalysisConfig):
    r"""
    Settings of `trl-srppo analyze critic-export`: the fields of [`RolloutAnalysisConfig`]. The critic is optional:
    with it, each sentence also gets the critic's score. Writes `critic_labelling.jsonl` beside the reports.
    """


def run_critic_export(config: CriticExportConfig) -> dict:
    """`trl-srppo analyze critic-export`: sample and score solutions and write the JSONL of sentences for an external
    judge ([`export_for_labelling`])."""
    model, tokenizer = load_policy(config)
    rollouts = sample_rollouts(config, "critic-export", model, tokenizer)
    bins = rollouts.prompt_bins()
    counts = correct_counts(rollouts.correct, rollouts.prompt_index, rollouts.num_prompts)
    prompt_texts = [
        render_prompt(tokenizer, p, config.system_prompt, config.use_chat_template, config.chat_template_kwargs)
        for p in rollouts.prompts
    ]  # the text the policy saw, scored again by critic-quality
    templated = uses_chat_template(tokenizer, config.use_chat_template)  # decides the special tokens of the prompt
    records = []
    for i, completion in enumerate(rollouts.completions):
        p = int(rollouts.prompt_index[i])
        reward = float(rollouts.rewards[i])
        records.append(
            {
                "prompt_id": p,
                "rollout_id": i % rollouts.num_rollouts,
                "prompt": rollouts.prompts[p],
                "prompt_text": prompt_texts[p],
                "chat_template_applied": templated,
                "completion": completion,
                "reward": reward if reward == reward else None,
                "num_correct": int(counts[p]),
                "num_rollouts": rollouts.num_rollouts,
                "bin": bins[p],
            }
        )
    if config.critic_model_name_or_path:
        critic = load_analysis_critic(config, "critic-export", model)
        for record in records:
            scored = sentence_scores(
                critic,
                tokenizer,
                record["prompt_text"],
                record["completion"],
                config.critic_head_or_default,
                templated,
            )
            record["critic_sentence_values"] = scored["sentence_values"]
    os.makedirs(config.output_dir, exist_ok=True)
    path = os.path.join(config.output_dir, LABELLING_FILE)
    num_sentences = export_for_labelling(path, records)
    results = {
        "file": path,
        "num_prompts": rollouts.num_prompts,
        "num_solutions": len(records),
        "num_sentences": num_sentences,
        "sentences_per_solution": [len(split_sentences(r["completion"])) for r in records],
        "bin_counts": bin_counts(bins),
        "label_fields": list(LABEL_FIELDS),
    }
    md = "# Critic labelling export\n\n" + markdown_table(
        ["file", "prompts", "solutions", "sentences"], [[path, rollouts.num_prompts, len(records), num_sentences]]
    )
    figure = histogram_figure(results["sentences_per_solution"], "sentences per solution", "solutions")
    write_outputs("critic-export", config, results, md, figure)
    return results


# ---- the `critic-quality` analysis ----------------------------------------------------------------------------------


@dataclass
class CriticQualityConfig(AnalysisConfig):
    r"""
    Settings of `trl-srppo analyze critic-quality` (on top of [`AnalysisConfig`]; the critic is required, the
    policy's tokenizer is used).

    Args:
        labelled (`str`):
            The JSONL written by `critic-export`, with the labels filled in.
    """

    labelled: str | None = field(
        default=None, metadata={"help": "The JSONL written by critic-export, with the labels filled in."}
    )

    def __post_init__(self):
        super().__post_init__()
        if not self.labelled:
            raise ValueError("labelled required: the JSONL written by critic-export, with the labels filled in.")


def critic_quality_table(results: dict) -> str:
    """The markdown report of [`run_critic_quality`]'s results."""
    rows = [
        [
            name,
            results[name]["within_prompt"]["mean_auc"],
            results[name]["within_prompt"]["num_kept"],
            results[name]["within_prompt"]["num_excluded"],
            results[name]["pooled_auc"],
        ]
        for name in LABEL_FIELDS
    ]
    by_bin = results["by_bin"]
    bin_rows = [
        [
            b,
            by_bin["token_value"][b]["num_prompts"],
            by_bin["token_value"][b]["mean_value"],
            by_bin["prompt_value"][b]["mean_value"],
            by_bin["token_value"][b]["success_rate"],
        ]
        for b in BINS
    ]
    return (
        "# Critic quality\n\n"
        + markdown_table(["label", "within-prompt AUC", "prompts kept", "prompts excluded", "pooled AUC"], rows)
        + "\n## Critic value by difficulty bin\n\n"
        + markdown_table(["bin", "prompts", "mean token value", "mean V(s_0)", "success rate"], bin_rows)
    )


def critic_quality_figure(results: dict):
    """The critic's mean token value beside the success rate, per bin."""
    by_bin = results["by_bin"]["token_value"]
    return bar_figure(
        list(BINS),
        {
            "mean token value": [by_bin[b]["mean_value"] for b in BINS],
            "success rate": [by_bin[b]["success_rate"] for b in BINS],
        },
        "Critic value against success rate",
        "value",
    )


def run_critic_quality(config: CriticQualityConfig) -> dict:
    """`trl-srppo analyze critic-quality`: [`critic_quality`] of the critic on the labelled file."""
    from ..evaluation.models import load_tokenizer, resolve_model

    source = resolve_model(config.model_name_or_path, config.model_revision)
    tokenizer = load_tokenizer(source, config.trust_remote_code)
    critic = load_analysis_critic(config, "critic-quality")
    results = critic_quality(read_labelled(config.labelled), critic, tokenizer, config.critic_head_or_default)
    write_outputs("critic-quality", config, results, critic_quality_table(results), critic_quality_figure(results))
    return results
