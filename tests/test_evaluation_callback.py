# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The pass@k training callback logs its metrics, with a fake trainer state and inside a real Trainer run."""

import pytest
import torch
from test_evaluation_helpers import FIXTURES, make_model, make_tokenizer
from transformers import Trainer, TrainerControl, TrainerState, TrainingArguments

from trl_srppo.evaluation.callback import PassAtKCallback
from trl_srppo.evaluation.sampling import SamplingConfig

SAMPLING = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=6, seed=3)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


def test_callback_logs_pass_at_k_into_state_log_history(tokenizer):
    rows = [{"problem": "Compute 2+2.", "answer": "4"}, {"problem": "Compute 3+3.", "answer": "6"}]
    callback = PassAtKCallback("math500", rows=rows, n=4, every_n_steps=2, sampling=SAMPLING)
    model = make_model(tokenizer)
    model.train()
    state, control = TrainerState(), TrainerControl()
    kwargs = {"model": model, "processing_class": tokenizer}
    rng_before = torch.get_rng_state()

    state.global_step = 1
    callback.on_step_end(None, state, control, **kwargs)
    assert state.log_history == [] and callback.history == []

    state.global_step = 2
    callback.on_step_end(None, state, control, **kwargs)
    assert len(state.log_history) == 1
    logged = state.log_history[0]
    assert logged["step"] == 2
    assert set(logged) == {
        "step",
        "eval_passk/math500/pass@1",
        "eval_passk/math500/pass@2",
        "eval_passk/math500/pass@4",
        "eval_passk/math500/mean_reward",
    }
    assert all(0.0 <= logged[f"eval_passk/math500/pass@{k}"] <= 1.0 for k in (1, 2, 4))
    assert callback.history[0][0] == 2
    assert model.training  # switched back to train mode
    assert torch.equal(torch.get_rng_state(), rng_before)  # training randomness untouched


def test_callback_scores_exactly_and_logs_through_a_trainer(tokenizer, monkeypatch):
    data_dir = FIXTURES

    class RecordingTrainer:
        def __init__(self):
            self.logged = []

        def log(self, logs):
            self.logged.append(logs)

    trainer = RecordingTrainer()
    callback = PassAtKCallback(
        "aime24", data_dir=str(data_dir), max_problems=2, n=2, ks=[1, 2], every_n_steps=5, sampling=SAMPLING
    ).attach(trainer)
    assert len(callback.problems) == 2 and callback.problems[0].columns == {"answer": "16"}  # fixtures/aime24.jsonl

    # Replace generation by fixed completions: problem 0 gets one gold answer out of 2, problem 1 none.
    from trl_srppo.evaluation import callback as callback_module
    from trl_srppo.evaluation.engines import Completion

    def fake_generate(self, prompt_ids, n, sampling, seed=None):
        texts = [["\\boxed{16}", "\\boxed{1}"], ["\\boxed{0}", "no answer"]]
        return [[Completion(t, 3, "stop") for t in pair] for pair in texts]

    monkeypatch.setattr(callback_module.TransformersEngine, "generate", fake_generate)
    state = TrainerState()
    state.global_step = 10
    callback.on_step_end(None, state, TrainerControl(), model=make_model(tokenizer), processing_class=tokenizer)
    assert trainer.logged == [
        {
            "eval_passk/aime24/pass@1": 0.25,
            "eval_passk/aime24/pass@2": 0.5,
            "eval_passk/aime24/mean_reward": 0.25,
        }
    ]


def test_callback_inside_a_real_trainer_run(tokenizer, tmp_path):
    from datasets import Dataset

    model = make_model(tokenizer)
    ids = tokenizer("knight knave answer")["input_ids"]
    dataset = Dataset.from_dict({"input_ids": [ids] * 4, "labels": [ids] * 4})
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    rows = [{"problem": "Compute 2+2.", "answer": "4"}]
    callback = PassAtKCallback("math500", rows=rows, n=2, every_n_steps=2, sampling=SAMPLING)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.add_callback(callback.attach(trainer))
    trainer.train()
    entries = [e for e in trainer.state.log_history if "eval_passk/math500/pass@1" in e]
    assert len(entries) == 1 and entries[0]["step"] == 2
    assert "eval_passk/math500/pass@2" in entries[0]
