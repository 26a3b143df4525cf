# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Critic quality: sentence splitting, token spans, AUC against a brute-force count, the labelling file."""

import json
import math
import random

import pytest
import torch

from trl_srppo.analysis.critic_quality import (
    auc,
    export_for_labelling,
    pooled_auc,
    read_labelled,
    sentence_scores,
    sentence_token_spans,
    split_sentences,
    values_by_bin,
    within_prompt_auc,
)


def texts(text):
    return [text[s:e] for s, e in split_sentences(text)]


def test_split_sentences_keeps_numbers_and_latex_intact():
    assert texts("We get x = 3.5. Is it right? Yes!\nSo $\\frac{1}{2} = 0.5$ holds.") == [
        "We get x = 3.5.",
        "Is it right?",
        "Yes!",
        "So $\\frac{1}{2} = 0.5$ holds.",
    ]
    assert texts("Wait... ok\n\n  next line") == ["Wait...", "ok", "next line"]
    assert texts("no boundary at all") == ["no boundary at all"]
    assert texts("  \n \n") == []
    assert split_sentences("Ab. Cd") == [(0, 3), (4, 6)]


def test_sentence_token_spans_by_overlap():
    offsets = [(0, 2), (3, 5), (5, 6), (0, 0), (7, 9), (9, 12)]  # (0, 0): a special token, matches nothing
    sentences = [(0, 6), (7, 10), (10, 12)]
    assert sentence_token_spans(offsets, sentences) == [[0, 1, 2], [4, 5], [5]]


def brute_force_auc(scores, labels):
    pairs = [(s, t) for s, y in zip(scores, labels) if y for t, z in zip(scores, labels) if not z]
    return sum(1.0 if s > t else 0.5 if s == t else 0.0 for s, t in pairs) / len(pairs)


def test_auc_matches_pairwise_count_with_ties():
    rng = random.Random(0)
    for _ in range(200):
        m = rng.randint(2, 25)
        scores = [rng.choice([0.1, 0.2, 0.3, 0.5, 0.9]) for _ in range(m)]  # many ties
        labels = [rng.randint(0, 1) for _ in range(m)]
        if len(set(labels)) < 2:
            assert math.isnan(auc(scores, labels))
            continue
        assert auc(scores, labels) == pytest.approx(brute_force_auc(scores, labels))
    assert auc([0.2, 0.2], [1, 0]) == 0.5
    assert auc([0.9, 0.1], [1, 0]) == 1.0
    assert auc([0.9, 0.1], [0, 1]) == 0.0


def test_within_prompt_auc_excludes_and_counts_one_class_prompts():
    groups = [
        ([0.9, 0.1, 0.5], [1, 0, 0]),  # AUC 1
        ([0.3, 0.3, 0.8, 0.1], [1, 0, 0, 1]),  # pairs (0.3 vs 0.3, 0.8), (0.1 vs 0.3, 0.8): 0.5 / 4
        ([0.4, 0.6], [1, 1]),  # one class: excluded
        ([], []),  # nothing labelled: excluded
    ]
    result = within_prompt_auc(groups)
    assert result["num_kept"] == 2
    assert result["num_excluded"] == 2
    assert result["mean_auc"] == pytest.approx((1.0 + 0.125) / 2)
    scores = [s for g, _ in groups for s in g]
    labels = [y for _, g in groups for y in g]
    assert pooled_auc(groups) == pytest.approx(brute_force_auc(scores, labels))


def test_values_by_bin():
    out = values_by_bin([0.9, 0.7, 0.2, 0.5], [1.0, 0.75, 0.0, 0.5], ["easy", "easy", "hard", "medium"])
    assert out["easy"] == {"num_prompts": 2, "mean_value": pytest.approx(0.8), "success_rate": pytest.approx(0.875)}
    assert out["hard"]["mean_value"] == pytest.approx(0.2)


def test_export_and_read_back_labels(tmp_path):
    path = tmp_path / "label.jsonl"
    records = [
        {"prompt_id": 0, "rollout_id": r, "prompt": "p", "completion": "A. B? C", "reward": 1.0} for r in (0, 1)
    ]
    assert export_for_labelling(str(path), records) == 6
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [s["text"] for s in lines[0]["sentences"]] == ["A.", "B?", "C"]
    assert lines[0]["sentences"][1] == {
        "id": 1,
        "text": "B?",
        "start": 3,
        "end": 5,
        "sentence_correct": None,
        "state_correct": None,
    }
    lines[0]["sentences"][0]["sentence_correct"] = True
    lines[0]["sentences"][1]["state_correct"] = 0
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    back = read_labelled(str(path))
    assert back[0]["sentences"][0]["sentence_correct"] is True
    assert back[0]["sentences"][1]["state_correct"] is False
    assert back[1]["sentences"][0]["sentence_correct"] is None
    lines[1]["sentences"][0]["state_correct"] = "yes"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(ValueError, match="state_correct"):
        read_labelled(str(path))
    # The export as written (nothing labelled yet), a truncated line, a foreign file: errors that say which.
    unlabelled = [
        {**line, "sentences": [{**s, "sentence_correct": None, "state_correct": None} for s in line["sentences"]]}
        for line in lines
    ]
    path.write_text("\n".join(json.dumps(line) for line in unlabelled) + "\n")
    with pytest.raises(ValueError, match="has no labelled sentence"):
        read_labelled(str(path))
    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps(lines[0])[:20] + "\n")
    with pytest.raises(ValueError, match=rf"{path}:2: not a JSON line"):
        read_labelled(str(path))
    path.write_text(json.dumps({"prompt": "1 + 1", "answer": "2"}) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:1: not a record of `trl-srppo analyze critic-export`"):
        read_labelled(str(path))


def test_sentence_scores_read_the_value_after_each_token(toy):
    from trl_srppo.method.critics.model import critic_from_policy, prefix_values

    tokenizer, make_model, _ = toy
    critic = critic_from_policy(make_model()).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        critic.score.weight.normal_()  # non-constant values
    scored = sentence_scores(critic, tokenizer, "1 2 3", "4 5\n6 7 8")
    ids = tokenizer("1 2 3 4 5 6 7 8", add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        before = torch.sigmoid(prefix_values(critic, ids, torch.ones_like(ids), 5))[0]  # V(s_0) .. V(s_4)
        after_last = torch.sigmoid(critic(input_ids=ids).logits[0, -1, 0])  # V(s_5)
    expected = torch.cat([before[1:], after_last.reshape(1)])  # V(s_1) .. V(s_5)
    assert torch.allclose(torch.tensor(scored["token_values"]), expected, atol=1e-6)
    assert scored["prompt_value"] == pytest.approx(float(before[0]), abs=1e-6)
    assert scored["sentence_values"] == pytest.approx([float(expected[:2].mean()), float(expected[2:].mean())])


def test_auc_refuses_nan_scores():
    with pytest.raises(ValueError, match="1 of 3 scores are NaN"):
        auc([float("nan"), 0.2, 0.3], [1, 0, 1])
    assert auc([0.2, 0.3], [0, 1]) == 1.0  # once the unscored item is left out


@pytest.mark.parametrize("use_chat_template", [False, True])
def test_sentence_scores_tokenize_the_prompt_as_the_rollouts_do(toy, use_chat_template):
    # A tokenizer that adds a BOS to plain text (Llama/Mistral style): the rollouts start a plain-text prompt with it,
    # and the critic must be scored on the same ids, so V(s_0) matches the value the rollouts were trained with.
    from tokenizers import processors

    from trl_srppo.analysis import critic_rollout_values, generate_rollouts
    from trl_srppo.evaluation.prompts import render_prompt
    from trl_srppo.method.critics.model import critic_from_policy

    tokenizer, make_model, _ = toy
    bos = tokenizer.convert_tokens_to_ids("<eos>")  # a stand-in BOS
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<eos> $A", special_tokens=[("<eos>", bos)]
    )
    policy = make_model()
    critic = critic_from_policy(policy).eval()
    torch.manual_seed(1)
    with torch.no_grad():
        critic.score.weight.normal_(std=0.5)
    rollouts = generate_rollouts(policy, tokenizer, ["1 2 3 ="], 1, 1.0, 2, use_chat_template=use_chat_template)
    critic_rollout_values(critic, rollouts)
    prompt_ids = rollouts.prompt_ids[0][rollouts.prompt_mask[0].bool()].tolist()
    assert (prompt_ids[0] == bos) is not use_chat_template  # BOS only without the chat template
    text = render_prompt(tokenizer, "1 2 3 =", None, use_chat_template)
    scored = sentence_scores(critic, tokenizer, text, "4", chat_template_applied=use_chat_template)
    assert scored["prompt_value"] == pytest.approx(float(rollouts.values[0, 0]), abs=1e-6)
    if not use_chat_template:
        tokenizer.chat_template = None  # without the flag: plain text when the tokenizer has no chat template
        assert sentence_scores(critic, tokenizer, text, "4")["prompt_value"] == pytest.approx(scored["prompt_value"])
