# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Fails loudly if the installed TRL drops or renames a GRPOTrainer hook that SRPPOTrainer overrides or relies on, or
an attribute of GRPOTrainer / Trainer that the package reads or writes (`INTERNALS`, the one list of them)."""

import inspect

import pytest
from trl import GRPOTrainer

from trl_srppo import SRPPOTrainer
from trl_srppo.method.srppo_trainer import METHOD_HOOKS, SRPPOMethod, SRPPOMethodTrainer
from trl_srppo.runtime.mixin import RUNTIME_HOOKS, RuntimeMixin, grpo_trainer_class

# hook -> parameters SRPPOTrainer's override passes through or reads
HOOKS = {
    "_calculate_rewards": ["inputs", "prompts", "completions", "completion_ids_list"],
    "_generate_and_score_completions": ["inputs"],
    "_compute_loss": ["model", "inputs"],
    "create_scheduler": ["num_training_steps", "optimizer"],
    "save_model": ["output_dir", "_internal_call"],
    "_save_optimizer_and_scheduler": ["output_dir"],
    "_load_optimizer_and_scheduler": ["checkpoint"],
    "create_model_card": ["model_name", "dataset_name", "tags"],
    "_push_from_checkpoint": ["checkpoint_folder"],
    "get_train_dataloader": [],  # prompt sampling: generated batches of prompt_pool_factor x the prompts
    "_get_train_sampler": ["dataset"],
}
# hook -> parameters of the hooks `trl_srppo.runtime.resume.ReliableTrainerMixin` overrides or calls
MIXIN_HOOKS = {
    "train": ["resume_from_checkpoint"],
    "_save_checkpoint": ["model", "trial"],
    "_get_train_sampler": ["dataset"],
    "_get_output_dir": ["trial"],
    "_init_training_state": ["resume_from_checkpoint"],
}
# hook -> parameters of the hooks `trl_srppo.runtime.run_output.RunOutputMixin` overrides, and GRPO internals it reads
OUTPUT_HOOKS = {
    "_generate_single_turn": ["prompt_ids"],
    "_calculate_rewards": ["inputs", "prompts", "completions", "completion_ids_list"],
    "log": ["logs", "start_time"],
    "_issue_warnings_after_load": ["load_result"],
}


# attribute of a built GRPOTrainer -> (its type, who reads or writes it)
INTERNALS = {
    "_metrics": (dict, "srppo_trainer: the critic's metrics, beside GRPO's, per mode"),
    "_logs": (dict, "srppo_trainer: the advantages of the completions table; run_output: the prompts logged"),
    "_step": (int, "runtime.resume: the position in the generated batch, saved and restored on resume"),
    "_buffered_inputs": (type(None), "runtime.resume: the generated batch, saved and restored on resume"),
    "num_generations": (int, "srppo_trainer: a group of one has no spread to log"),
    "num_generations_eval": (int, "srppo_trainer: as num_generations, in evaluation"),
    "num_iterations": (int, "srppo_trainer: the critic's steps over the run"),
    "mask_truncated_completions": (bool, "srppo_trainer: the critic's mask keeps truncated completions"),
    "reward_func_names": (list, "srppo_trainer: the outcome's reward function, and errors that name one"),
    "reward_weights": (object, "srppo_trainer: the weighted-sum outcome"),
    "reward_funcs": (list, "srppo_trainer: each Python reward function wrapped with its deadline"),
    "chat_template_kwargs": (dict, "startup_checks: prompt lengths with the chat template"),
    "max_completion_length": (int, "startup_checks: room for a completion in the context"),
    "log_completions": (bool, "run_output: completion logs once per generated batch"),
    "use_vllm": (bool, "vllm_cpu and train: a colocated vLLM on the CPU"),
    "_train_batch_size": (int, "srppo_trainer: the loader's batch, prompt_pool_factor x while it is built"),
    "_tokenize_prompts": (object, "prompt_sampling: the pool's prompts tokenised as GRPO tokenises them"),
    "_tokenizer": (object, "prompt_sampling: the pad token of the pool's prompts"),
}


def test_a_grpo_trainer_still_has_the_internals_the_package_uses(toy, tmp_path):
    from helpers import toy_grpo_trainer

    trainer = toy_grpo_trainer(toy, tmp_path, max_steps=1)
    for name, (kind, used_by) in INTERNALS.items():
        assert hasattr(trainer, name), f"trl.GRPOTrainer no longer sets `{name}` ({used_by})"
        assert isinstance(getattr(trainer, name), kind), f"GRPOTrainer.{name} is no longer a {kind} ({used_by})"
    # `CriticPushCallback` copies the critic on `on_push_begin`, which the Trainer calls once its guards let a push of
    # a checkpoint go, before it uploads `output_dir` and the checkpoint's folder, named `checkpoint-<step>`.
    source = inspect.getsource(type(trainer).__mro__[-2]._push_from_checkpoint)  # transformers' Trainer
    guards, upload = source.index("self.push_in_progress"), source.index("upload_folder(")
    assert guards < source.index("self.callback_handler.on_push_begin(") < upload, "Trainer pushes otherwise"
    save = inspect.getsource(type(trainer).__mro__[-2]._save_checkpoint)
    assert 'f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"' in save, "Trainer names its checkpoints otherwise"


@pytest.mark.parametrize("hook", list(HOOKS) + list(MIXIN_HOOKS) + list(OUTPUT_HOOKS))
def test_parent_still_has_the_hook_with_its_signature(hook):
    parent = getattr(GRPOTrainer, hook, None)
    assert parent is not None, f"trl.GRPOTrainer no longer has `{hook}`; SRPPOTrainer overrides it"
    params = list(inspect.signature(parent).parameters)
    for name in {**HOOKS, **MIXIN_HOOKS, **OUTPUT_HOOKS}[hook]:
        assert name in params, f"trl.GRPOTrainer.{hook} lost its `{name}` parameter (has {params})"


def overrides(trainer_class: type) -> dict[str, set[type]]:
    """Every `GRPOTrainer` / `Trainer` method that a class of `trainer_class`'s MRO before `GRPOTrainer` defines (an
    override, whichever mixin holds it) -> the classes that define it."""
    mro = trainer_class.__mro__
    found = {}
    for klass in mro[: mro.index(GRPOTrainer)]:
        for name, value in vars(klass).items():
            if callable(value) and hasattr(GRPOTrainer, name):
                found.setdefault(name, set()).add(klass)
    return found


def runtime_classes() -> set[type]:
    return set(RuntimeMixin.__mro__[:-1])  # RuntimeMixin and the mixins it is made of, not `object`


def test_srppo_trainer_overrides_exactly_the_method_and_runtime_lists():
    found = overrides(SRPPOTrainer)
    assert set(found) == set(METHOD_HOOKS) | set(RUNTIME_HOOKS)
    by_method = {name for name, owners in found.items() if SRPPOMethod in owners}
    by_runtime = {name for name, owners in found.items() if owners & runtime_classes()}
    assert by_method == set(METHOD_HOOKS), "METHOD_HOOKS must list every override SRPPOMethod defines"
    assert by_runtime == set(RUNTIME_HOOKS), "RUNTIME_HOOKS must list every override the runtime mixins define"
    assert set().union(*found.values()) <= {SRPPOMethod} | runtime_classes()  # nothing overrides GRPO elsewhere


def test_grpo_gets_the_same_runtime_from_the_same_place():
    grpo = grpo_trainer_class()
    assert issubclass(grpo, RuntimeMixin) and issubclass(SRPPOTrainer, RuntimeMixin)
    found = overrides(grpo)
    assert set(found) == set(RUNTIME_HOOKS)
    assert set().union(*found.values()) <= runtime_classes()


def test_the_method_alone_runs_on_trls_runtime():
    found = overrides(SRPPOMethodTrainer)
    assert set(found) == set(METHOD_HOOKS)
    assert not set(SRPPOMethodTrainer.__mro__) & runtime_classes()


def test_every_listed_hook_is_a_method_of_grpo_with_a_description():
    for name, description in {**METHOD_HOOKS, **RUNTIME_HOOKS}.items():
        assert callable(getattr(GRPOTrainer, name, None)), f"trl.GRPOTrainer no longer has `{name}`"
        assert isinstance(description, str) and description.strip()
    assert set(HOOKS) == set(METHOD_HOOKS) - {"__init__"}


def test_overrides_finds_an_override_in_any_mixin():
    class Mixin:
        def log(self, logs, start_time=None):
            return super().log(logs, start_time)

        def not_a_hook(self):
            pass

    probe = type("Probe", (Mixin, GRPOTrainer), {})
    assert overrides(probe) == {"log": {Mixin}}


def test_grpo_logs_completions_from_what_run_output_switches():
    # RunOutputMixin turns `log_completions` off around `log` when no new batch was generated, and reads the buffer
    # `_logs["prompt"]`; the generation progress counts forwards of the input embeddings during `generate`.
    log_source = inspect.getsource(GRPOTrainer.log)
    assert "self.log_completions" in log_source and 'self._logs["prompt"]' in log_source
    generate_source = inspect.getsource(GRPOTrainer._generate_single_turn)
    assert "unwrapped_model.generate(" in generate_source and "if self.use_vllm:" in generate_source


def test_grpo_generation_output_still_carries_what_srppo_reads():
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    for key in ('"prompt_ids"', '"prompt_mask"', '"completion_ids"', '"completion_mask"', '"advantages"'):
        assert key in source, f"GRPOTrainer's generation output no longer has {key}"
    assert "self._calculate_rewards(" in source, "GRPO no longer scores completions through _calculate_rewards"
    loss_source = inspect.getsource(GRPOTrainer._compute_loss)
    assert "advantages.dim() == 1" in loss_source, "GRPO's loss no longer accepts (B, T) advantages"


def test_checkpoint_save_still_rotates_last_and_the_sampler_is_trls():
    # ReliableTrainerMixin marks a checkpoint complete between the parent's writes and its rotation of old ones, and
    # replaces TRL's RepeatSampler with a subclass that takes the same arguments.
    from transformers import Trainer
    from trl.trainer.utils import RepeatSampler

    source = inspect.getsource(Trainer._save_checkpoint)
    assert "rotate_checkpoints(" in source and "save_total_limit=self.args.save_total_limit" in source
    assert "RepeatSampler(" in inspect.getsource(GRPOTrainer._get_train_sampler)
    params = list(inspect.signature(RepeatSampler).parameters)
    assert params[:6] == ["data_source", "mini_repeat_count", "batch_size", "repeat_count", "shuffle", "seed"]


def test_colocated_vllm_is_started_and_kept_where_trl_srppo_reads_it():
    # `trl_srppo.runtime.vllm_cpu` checks the policy and sets vLLM's CPU kernels before GRPOTrainer.__init__ (called by
    # the mixin with its first three arguments), then reads the engine at `trainer.vllm_generation.llm` (its dtype, and
    # its shutdown at the end of `trl-srppo train`).
    from trl.generation.vllm_generation import VLLMGeneration

    assert list(inspect.signature(GRPOTrainer.__init__).parameters)[1:4] == ["model", "reward_funcs", "args"]
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "self.vllm_generation = VLLMGeneration(" in init, "GRPOTrainer no longer keeps its vLLM in vllm_generation"
    assert "self.use_vllm = args.use_vllm" in init and "self.vllm_mode = args.vllm_mode" in init
    assert "self.llm = LLM(" in inspect.getsource(VLLMGeneration._init_vllm), "VLLMGeneration no longer has .llm"


def test_the_prompt_pool_still_enlarges_grpos_loader_and_is_tokenised_as_grpo_generates():
    # `SRPPOTrainer.get_train_dataloader` multiplies `_train_batch_size` while GRPO builds its loader, and
    # `_get_train_sampler` multiplies the RepeatSampler's `batch_size`, read when it iterates; the pool's prompts are
    # valued from `_tokenize_prompts`, what GRPO's generation tokenises them with.
    from trl.trainer.utils import RepeatSampler

    loader = inspect.getsource(GRPOTrainer.get_train_dataloader)
    assert "batch_size=self._train_batch_size * self.args.steps_per_generation" in loader
    assert "sampler_fn=self._get_train_sampler" in loader
    assert "self.batch_size" in inspect.getsource(RepeatSampler.__iter__)
    assert "self._tokenize_prompts(prompts)" in inspect.getsource(GRPOTrainer._generate)
