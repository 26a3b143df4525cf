# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""GRPOConfig options and GRPOTrainer arguments through SRPPOTrainer: each trains, both policy and critic learn, and
the policy moves the right way.

One or two steps of the toy task per case; a case fails if SRPPOTrainer refuses or crashes on something GRPOTrainer
accepts, if either model stays unchanged, or if the step it checks does not raise the probability of the batch's
rewarded completions and lower that of its unrewarded ones (each completion's log-probability under the policy before
and after the step, teacher-forced on the token ids the reward functions were given).
"""

import asyncio
import functools
import inspect
from unittest.mock import patch

import pytest
import torch
from conftest import cpu_config, tiny_reward_model
from datasets import IterableDataset
from helpers import small_digit_reward
from peft import LoraConfig, get_peft_model
from transformers import TrainerCallback

from trl_srppo import SRPPOTrainer


def even_digit_reward(completions, **kwargs):
    return [1.0 if c.split() and c.split()[0] in "02468" else 0.0 for c in completions]


async def async_digit_reward(completions, **kwargs):
    await asyncio.sleep(0)
    return small_digit_reward(completions)


LORA = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])

# case name -> (SRPPOConfig overrides, trainer options)
CASES = {
    **{f"loss_type={t}": (dict(loss_type=t), {}) for t in ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")},
    "loss_type=luspo": (dict(loss_type="luspo", importance_sampling_level="sequence"), {}),
    "loss_type=vespo": (dict(loss_type="vespo"), {}),
    "importance_sampling_level=sequence": (dict(importance_sampling_level="sequence", loss_type="grpo"), {}),
    "top_entropy_quantile": (dict(top_entropy_quantile=0.5), {}),
    "delta": (dict(delta=1.5), {}),
    "epsilon_high": (dict(epsilon_high=0.28), {}),
    "off_policy_mask_threshold": (dict(off_policy_mask_threshold=0.5), {}),
    "num_iterations": (dict(num_iterations=2, max_steps=2), {}),
    "beta": (dict(beta=0.1), {"model_from_path": True}),
    "sync_ref_model": (
        dict(beta=0.1, sync_ref_model=True, ref_model_sync_steps=1, max_steps=2),
        {"model_from_path": True},
    ),
    "async_reward": (dict(), {"reward_funcs": async_digit_reward}),
    "two_reward_funcs_normalized": (
        dict(srppo_outcome="normalized_sum"),
        {"reward_funcs": [small_digit_reward, even_digit_reward]},
    ),
    "reward_weights_threshold": (
        dict(reward_weights=[1.0, 2.0], srppo_outcome_threshold=1.0),
        {"reward_funcs": [small_digit_reward, even_digit_reward]},
    ),
    "reward_model_threshold": (dict(srppo_outcome_threshold=0.0), {"reward_model": True}),
    "num_generations=2": (dict(num_generations=2), {}),
    "num_generations_eval": (
        dict(num_generations_eval=2, eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=4),
        {"eval_dataset": True},
    ),
    "iterable_dataset": (dict(), {"iterable": True}),
    "peft_config": (dict(learning_rate=3e-2), {"peft_config": LoraConfig(**LORA)}),
    "peft_instance": (dict(learning_rate=3e-2), {"peft_instance": True}),
    # 64 rollouts (seed 1): a random toy model seldom ends within 2 tokens, and the direction check needs rewarded and
    # unrewarded completions among those that end (truncated ones are out of the loss).
    "mask_truncated_completions": (
        dict(mask_truncated_completions=True, max_completion_length=2, per_device_train_batch_size=64, seed=1),
        {},
    ),
    "linear_critic": (dict(srppo_method="ppo"), {}),
}


def build(toy, tmp_path, overrides, options, recorder):
    """The case's trainer; `recorder` ([`RolloutRecorder`]) wraps its reward functions and watches its steps."""
    tokenizer, build_model, dataset = toy
    fields = dict(max_steps=1, per_device_train_batch_size=8)
    fields.update(overrides)
    model = build_model()
    if options.get("model_from_path"):  # a reference model loaded from the policy's checkpoint
        model.save_pretrained(tmp_path / "policy")
        tokenizer.save_pretrained(tmp_path / "policy")
        model = str(tmp_path / "policy")
    if options.get("peft_instance"):
        model = get_peft_model(model, LoraConfig(**LORA))
    reward_funcs = options.get("reward_funcs", small_digit_reward)
    if options.get("reward_model"):  # a sequence-classification model from a folder, as GRPOTrainer loads one
        torch.manual_seed(0)
        reward_funcs = [small_digit_reward, tiny_reward_model(tmp_path, tokenizer)]
    reward_funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
    reward_funcs = [
        f if isinstance(f, (str, torch.nn.Module)) else recorder.wrap(f, i) for i, f in enumerate(reward_funcs)
    ]
    train_dataset = dataset
    if options.get("iterable"):
        rows = [dataset[i] for i in range(len(dataset))]
        train_dataset = IterableDataset.from_generator(lambda: iter(rows))
    trainer = SRPPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=cpu_config(tmp_path / "out", **fields),
        train_dataset=train_dataset,
        eval_dataset=dataset.select(range(8)) if options.get("eval_dataset") else None,
        processing_class=tokenizer,
        peft_config=options.get("peft_config"),
    )
    for i, func in enumerate(trainer.reward_funcs):  # a loaded reward model: its scores, as GRPO reads them
        if isinstance(func, torch.nn.Module):
            func.register_forward_hook(lambda module, inputs, output, i=i: recorder.record(i, output.logits[:, 0]))
    trainer.add_callback(recorder)
    return trainer


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def changed(module, before):
    return [k for k, v in module.state_dict().items() if k in before and not torch.equal(v, before[k])]


class RolloutRecorder(TrainerCallback):
    """What a test needs to see which way a training step moved the policy, from public hooks only: the rollouts each
    training step scored (through the reward functions [`wrap`] returns, or [`record`] for a reward model's scores)
    and the policy's weights before and after every step.

    `batches[s]`: the rollouts generated during step `s` (1-based): `prompts`, `completion_ids` (as the reward
    functions get them) and `scores` (`{reward function index: list of scores}`). `weights[s]`: the policy's state
    dict before and after step `s`. Rollouts scored outside a training step (evaluation) are not kept."""

    def __init__(self):
        self.step = None  # the training step under way, None outside one
        self.batches, self.weights = {}, {}

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.step = state.global_step + 1
        self.before = snapshot(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.weights[self.step] = (self.before, snapshot(model))
        self.step = None

    def record(self, index, scores, prompts=None, completion_ids=None):
        if self.step is None:
            return
        batch = self.batches.setdefault(self.step, {"scores": {}})
        assert index not in batch["scores"], f"two batches scored during step {self.step}"
        batch["scores"][index] = [float(x) for x in scores]
        if prompts is not None:
            batch.update(prompts=list(prompts), completion_ids=[list(ids) for ids in completion_ids])

    def wrap(self, func, index):
        """`func` (sync or async, its name kept for GRPO's logs), recording what it scores as reward function
        `index`."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def recorded_async(prompts, completions, completion_ids, **kwargs):
                scores = await func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
                self.record(index, scores, prompts, completion_ids)
                return scores

            return recorded_async

        @functools.wraps(func)
        def recorded(prompts, completions, completion_ids, **kwargs):
            scores = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
            self.record(index, scores, prompts, completion_ids)
            return scores

        return recorded

    def batch_of_step(self, step):
        """The rollouts step `step` trained on: the latest generated at or before it (with `num_iterations` > 1 a
        batch is reused by later steps)."""
        return self.batches[max(s for s in self.batches if s <= step)]


def prompt_ids_as_trl(tokenizer, prompts, tools=None):
    """The prompts' token ids as GRPOTrainer tokenizes them for generation (chat template for conversations)."""
    if isinstance(prompts[0], list):
        return tokenizer.apply_chat_template(
            conversation=prompts, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
    return tokenizer(text=prompts)["input_ids"]


@torch.no_grad()
def sequence_logprobs(model, weights, prompt_ids, completion_ids, masks):
    """Log-probability of each completion given its prompt under `model` with `weights` (a state dict), summed over
    the completion tokens where `masks` is 1 (the policy's loss mask), teacher-forced in one forward with the rows
    padded on the right (causal attention: a row's tokens never see its padding), at temperature 1 as the configs
    here sample. `model` gets its own weights back afterwards. (A deep copy would not do: the trained model's
    `forward` is patched on the instance, and the copy's still runs the original.)"""
    rows = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    attention_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    own, training = snapshot(model), model.training
    model.load_state_dict(weights)
    model.eval()
    logps = model(input_ids=ids, attention_mask=attention_mask).logits[:, :-1].float().log_softmax(-1)
    logps = logps.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, width - 1): position i predicts token i + 1
    model.load_state_dict(own)
    model.train(training)
    totals = []
    for row, prompt, mask in zip(logps, prompt_ids, masks, strict=True):
        completion = row[len(prompt) - 1 : len(prompt) - 1 + len(mask)]
        totals.append((completion * torch.tensor(mask, dtype=completion.dtype)).sum())
    return torch.stack(totals)


def assert_direction(delta, outcomes, what):
    """`delta`: each completion's change of log-probability over a step; `outcomes`: 1 rewarded, 0 unrewarded, any
    other value (a partial outcome, or a row outside the loss) not counted. The step must raise the rewarded
    completions' log-probability on average and lower the unrewarded ones'."""
    rewarded, unrewarded = delta[outcomes == 1], delta[outcomes == 0]
    report = f"{what}: rewarded {rewarded.tolist()}, unrewarded {unrewarded.tolist()}"
    assert len(rewarded) and len(unrewarded), f"the checked batch needs both outcomes; {report}"
    assert rewarded.mean() - unrewarded.mean() > 0, f"the step favoured the unrewarded completions; {report}"
    assert rewarded.mean() > 0, f"the step lowered the rewarded completions' probability; {report}"
    assert unrewarded.mean() < 0, f"the step raised the unrewarded completions' probability; {report}"


def outcomes_of(args, scores):
    """The SR-PPO outcome Y of each rollout from its reward functions' scores (`{index: list}`), as `args` defines it
    (`reward_weights`, `srppo_outcome` "weighted_sum" or "normalized_sum" of rewards valued in [0, 1],
    `srppo_outcome_threshold`)."""
    per_func = torch.tensor([scores[i] for i in sorted(scores)]).T  # (B, F)
    weights = torch.tensor(args.reward_weights or [1.0] * per_func.shape[1])
    outcome = per_func @ weights
    if args.srppo_outcome == "normalized_sum":
        outcome = outcome / weights.sum()
    if args.srppo_outcome_threshold is not None:
        outcome = (outcome >= args.srppo_outcome_threshold).float()
    return outcome


@pytest.mark.parametrize("case", list(CASES))
def test_grpo_option_trains_policy_and_critic(toy, tmp_path, case):
    overrides, options = CASES[case]
    recorder = RolloutRecorder()
    trainer = build(toy, tmp_path, overrides, options, recorder)
    policy_before, critic_before = snapshot(trainer.model), snapshot(trainer.critic)
    trainer.train()
    assert changed(trainer.critic, critic_before), f"the critic did not learn with {case}"
    assert changed(trainer.model, policy_before), f"the policy did not learn with {case}"
    logs = {k for entry in trainer.state.log_history for k in entry}
    assert {"critic/loss", "advantages/mean", "reward"} <= logs, f"metrics missing with {case}"
    if "num_generations_eval" in case:
        assert any("eval_frac_reward_zero_std" in entry for entry in trainer.state.log_history)

    # Direction, on the last step and the batch it trained on (with num_iterations=2, step 2 trains again on the
    # batch generated at step 1; with sync_ref_model, step 2 has a fresh batch and a reference model that moved).
    step = trainer.state.global_step
    batch = recorder.batch_of_step(step)
    tokenizer = toy[0]
    prompt_ids = prompt_ids_as_trl(tokenizer, batch["prompts"])
    assert [tokenizer.decode(ids) for ids in prompt_ids] == batch["prompts"]
    # The policy's loss mask: every completion token, none of a truncated completion (no <eos>) under
    # mask_truncated_completions, whose rows are then left out of the check.
    ended = torch.tensor([ids[-1] == tokenizer.eos_token_id for ids in batch["completion_ids"]])
    in_loss = ended if trainer.args.mask_truncated_completions else torch.ones_like(ended)
    if trainer.args.mask_truncated_completions:
        assert not ended.all(), "no completion was truncated: the case checks nothing of the option"
    masks = [[int(keep)] * len(ids) for keep, ids in zip(in_loss, batch["completion_ids"], strict=True)]
    before, after = recorder.weights[step]
    delta = sequence_logprobs(trainer.model, after, prompt_ids, batch["completion_ids"], masks)
    delta -= sequence_logprobs(trainer.model, before, prompt_ids, batch["completion_ids"], masks)
    outcomes = outcomes_of(trainer.args, batch["scores"]).masked_fill(~in_loss, -1)
    assert_direction(delta, outcomes, f"{case}, step {step}")


# ---- tools ----------------------------------------------------------------------------------------------------------

QWEN_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
QWEN_SPECIAL_TOKENS += ["<tool_response>", "</tool_response>", "<think>", "</think>"]


def qwen_chat_tokenizer():
    """A byte-level tokenizer (256 byte tokens and Qwen's chat tokens) with TRL's copy of Qwen3's chat template, which
    TRL recognises for parsing tool calls."""
    import os

    import trl
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja")) as f:
        wrapped.chat_template = f.read()
    return wrapped


def multiply_tool(a: int, b: int) -> int:
    """
    Multiplies two integers.

    Args:
        a: The first integer.
        b: The second integer.

    Returns:
        The product of the two integers.
    """
    return a * b


def found_twelve(completions, **kwargs):
    return [1.0 if "12" in str(completion) else 0.0 for completion in completions]


def test_tools_train_policy_and_critic_with_no_advantage_on_tool_output(tmp_path):
    """GRPOTrainer's `tools=`: the first completion calls the tool, whose result (not generated by the policy) is
    appended before the model goes on; the policy gets no advantage on those tokens, the critic still sees them, and
    the step makes the policy's own tokens likelier in the rewarded rollout and less likely in the other."""
    from datasets import Dataset
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = qwen_chat_tokenizer()
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )  # fmt: skip
    model = Qwen3ForCausalLM(config)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "What is 3 times 4?"}]}] * 4)
    recorder = RolloutRecorder()
    trainer = SRPPOTrainer(
        model=model,
        reward_funcs=recorder.wrap(found_twelve, 0),
        args=cpu_config(tmp_path / "out", max_steps=1, per_device_train_batch_size=2, max_completion_length=128),
        train_dataset=dataset,
        processing_class=tokenizer,
        tools=[multiply_tool],
    )
    trainer.add_callback(recorder)

    def encode(texts):
        ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
        width = max(len(i) for i in ids)
        return torch.tensor([i + [tokenizer.pad_token_id] * (width - len(i)) for i in ids])

    calls, generate_inputs = [], []

    def fake_generate(input_ids, **kwargs):  # the policy's turns: a tool call and a plain answer, then "12" after it
        calls.append(input_ids.shape[0])
        generate_inputs.append(input_ids.tolist())
        if len(calls) == 1:
            turns = ['<tool_call>\n{"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>']
            turns.append("I do not know.<|im_end|>")
        else:
            turns = ["It is 12.<|im_end|>"] * input_ids.shape[0]
        return torch.cat([input_ids, encode(turns).to(input_ids.device)], dim=1)

    outputs = []
    score = trainer._generate_and_score_completions

    def recording_score(inputs):
        outputs.append(score(inputs))
        return outputs[-1]

    trainer._generate_and_score_completions = recording_score
    policy_before, critic_before = snapshot(trainer.model), snapshot(trainer.critic)
    with patch.object(trainer.model, "generate", side_effect=fake_generate):
        trainer.train()

    assert calls == [2, 1]  # a second turn for the rollout that called the tool
    out = outputs[0]
    tool_output = (out["completion_mask"] * (1 - out["tool_mask"])).bool()  # (B, C), the tool's result
    assert tool_output[0].sum() > 0 and tool_output[1].sum() == 0
    assert torch.all(out["advantages"][tool_output] == 0)
    own_tokens = (out["completion_mask"] * out["tool_mask"]).bool()  # (B, C), generated by the policy
    assert torch.all(out["advantages"][own_tokens] != 0)
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    assert logs["tools/call_frequency"] == pytest.approx(1 / 2)
    assert changed(trainer.critic, critic_before), "the critic did not learn with tools"
    assert changed(trainer.model, policy_before), "the policy did not learn with tools"

    # Direction: the step raises the probability of the policy's own tokens in the rollout that found 12 (through
    # the tool) and lowers it in the one that did not; the tool's output, outside the loss, is not counted.
    batch = recorder.batch_of_step(1)
    prompt_ids = prompt_ids_as_trl(tokenizer, batch["prompts"], tools=[multiply_tool])
    assert prompt_ids == generate_inputs[0]  # the prompts as the policy got them (the same prompt twice: no padding)
    assert out["completion_mask"].sum(1).tolist() == [len(ids) for ids in batch["completion_ids"]]
    masks = [row[: len(ids)].tolist() for row, ids in zip(own_tokens.int(), batch["completion_ids"], strict=True)]
    before, after = recorder.weights[1]
    delta = sequence_logprobs(trainer.model, after, prompt_ids, batch["completion_ids"], masks)
    delta -= sequence_logprobs(trainer.model, before, prompt_ids, batch["completion_ids"], masks)
    assert batch["scores"][0] == [1.0, 0.0]
    assert_direction(delta, torch.tensor(batch["scores"][0]), "tools")
