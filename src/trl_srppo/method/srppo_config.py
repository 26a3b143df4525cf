# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`SRPPOConfig`: the fields SR-PPO adds to TRL's `GRPOConfig`, and the paper's methods as named presets."""

import contextlib
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from ..runtime.config import RuntimeConfig
from .core import ADVANTAGE_BASELINES, CRITIC_HEADS, CRITIC_LOSSES, OUTCOME_MODES, PROMPT_SAMPLING_MODES
from .critics.build import CRITIC_PARALLELISMS, CRITIC_TYPES
from .critics.model import CRITIC_DTYPES
from .registry import Registry
from .single_rollout import single_rollout_checks


@dataclass(frozen=True)
class ValueInit:
    """What a `critic_value_init` choice ([`CRITIC_VALUE_INITS`]) does to a fresh value head.

    Args:
        from_success_rate (`bool`):
            Whether the head's bias is moved, at the first generated batch, so that every prefix's value is that
            batch's success rate; `False` leaves it at zero.
    """

    from_success_rate: bool


# The critic's start and ZeRO stage, read by the trainer and the critic package. (The method's choices are registries
# in `core`, the critic's type and placement in `critics.build`, each name bound to what runs it.)
CRITIC_VALUE_INITS = Registry.of(
    "critic_value_init",
    {"success_rate": ValueInit(from_success_rate=True), "zero": ValueInit(from_success_rate=False)},
)
CRITIC_ZERO_STAGES = Registry.of(
    "critic_zero_stage",
    (1, 2, 3),
    hint="Stage 0 partitions nothing: for a whole critic on every process use critic_parallelism='replicate'.",
)
# The critic's learning rate, when unset, relative to the policy's (docs: `critic_learning_rate`).
CRITIC_LR_RATIO = 1.0

# The paper's single-rollout methods (docs/method.md#methods-and-presets). Each preset fills the fields below that
# the user left unset (`None`); a field set explicitly always wins. The Pass@k value is not given in the paper: k = 2
# is this package's default (docs/defaults.md says how it was chosen).
METHOD_PRESETS: dict[str, dict[str, Any]] = {
    "sr-ppo": {"pass_at_k": 2, "gae_lambda": 1.0, "critic_head": "sigmoid", "critic_loss_type": "bce_mse"},
    "sr-ppo-pass1": {"pass_at_k": 1, "gae_lambda": 1.0, "critic_head": "sigmoid", "critic_loss_type": "bce_mse"},
    "ppo": {"pass_at_k": 1, "gae_lambda": 1.0, "critic_head": "linear", "critic_loss_type": "mse"},
    "td": {"pass_at_k": 2, "gae_lambda": 0.0, "critic_head": "sigmoid", "critic_loss_type": "bce_mse"},
}
SRPPO_METHODS = Registry.of("srppo_method", METHOD_PRESETS)

# Every choice field and the registry of the values it accepts: `SRPPOConfig.__post_init__` checks each field once,
# against its registry (`Registry.check`), so every unknown value is refused with one message,
# `<field> must be 'a', 'b' or 'c', got 'x'.`; what runs a choice then looks it up (`registry[name]`).
CHOICES: dict[str, Registry] = {
    registry.setting: registry
    for registry in (
        SRPPO_METHODS,
        ADVANTAGE_BASELINES,
        PROMPT_SAMPLING_MODES,
        OUTCOME_MODES,
        CRITIC_HEADS,
        CRITIC_LOSSES,
        CRITIC_TYPES,
        CRITIC_VALUE_INITS,
        CRITIC_PARALLELISMS,
        CRITIC_ZERO_STAGES,
        CRITIC_DTYPES,
    )
}


@dataclass
class SRPPOConfig(RuntimeConfig, GRPOConfig):
    r"""
    Configuration class for the [`SRPPOTrainer`].

    [`SRPPOConfig`] inherits every parameter of TRL's [`~trl.GRPOConfig`] (generation, vLLM, clipping, KL, logging)
    and adds the Pass@k objective and the prefix critic. Only the new or re-defaulted fields are listed here. Two
    inherited fields are read differently: `gradient_checkpointing` sets transformers' `activation_checkpointing`
    (its name from transformers 5.2x on) when that is unset, without a deprecation warning; and with a separate
    critic (`critic_type="separate"`) `ddp_find_unused_parameters` defaults to `False` (every parameter of the policy
    takes part in its loss).

    A field that names a choice (`srppo_method`, `advantage_baseline`, `prompt_sampling`, `srppo_outcome`,
    `critic_head`, `critic_loss_type`, ...) accepts the names of its registry (`CHOICES`: a
    [`~trl_srppo.method.registry.Registry`] per field, the method's in `trl_srppo.method.core`, each name bound to the
    function that runs it), checked once when the config is built; to add a choice, register a function under its name.

    Parameters:
        > Parameters that select the method

        srppo_method (`str`, *optional*, defaults to `"sr-ppo"`):
            Which of the paper's single-rollout methods to run. Fills `pass_at_k`, `gae_lambda`, `critic_head` and
            `critic_loss_type` where they are left unset: `"sr-ppo"` (k = 2, Monte Carlo advantage, sigmoid critic
            with BCE + squared error), `"sr-ppo-pass1"` (the same with k = 1), `"ppo"` (k = 1, GAE with
            `gae_lambda`, unconstrained linear critic with squared error) and `"td"` (the one-step TD ablation,
            `gae_lambda = 0`).
        num_generations (`int`, *optional*, defaults to `1`):
            Rollouts per prompt. SR-PPO needs only one; with more, each rollout still gets its own critic-based
            advantage (no group baseline). `GRPOConfig`'s checks run as for one rollout
            (`trl_srppo.method.single_rollout`); a generated batch must still hold at least 2 rollouts over all
            processes (`per_device_train_batch_size=1` needs `gradient_accumulation_steps >= 2` or 2 processes).

        > Parameters that control the advantage

        pass_at_k (`int`, *optional*):
            The k of the Pass@k objective: each prompt's advantages are multiplied by `k * (1 - qhat(s_0)) ** (k-1)`.
            1 means the plain expected reward. Defaults to the method's preset (2 for `"sr-ppo"`).
        gae_lambda (`float`, *optional*):
            Lambda of GAE (with gamma = 1 and the outcome as terminal reward), in `[0, 1]`. 1.0 is the Monte Carlo
            advantage `Y - qhat(s_{t-1})` of SR-PPO and PPO; 0.0 is the one-step TD ablation. Defaults to the
            method's preset.
        advantage_baseline (`str`, *optional*, defaults to `"prefix"`):
            The critic's value that each token's advantage is measured against. `"prefix"`: the value of the prefix
            before the token, `A_t = w_k(s_0) * GAE_t` (SR-PPO). `"prompt"`: the value of the prompt alone for every
            token, `A_t = w_k(s_0) * (Y - qhat(s_0))`, one baseline per prompt (its difficulty). The critic learns the
            same targets either way; `"prompt"` needs `gae_lambda=1.0`.
        pass_at_k_normalize (`bool`, *optional*, defaults to `False`):
            Divide the Pass@k weights by their mean over the generated batch (all processes; the rows that move the
            policy: a scorable outcome and a token in the policy's loss mask), so that they re-weight prompts without
            changing the size of the step: the batch's mean weight `k (1 - qhat(s_0)) ** (k - 1)`
            moves with the success rate (it is `k` when every prompt looks unsolvable), which otherwise scales the
            policy's effective learning rate. With `critic_type="policy_head"` on-policy (one optimizer step per
            generated batch), whose values come from each micro-batch's training forward, the mean is over the
            micro-batch. With `prompt_sampling="pass_at_k"` the weights it divides are the importance weights.
        gradient_nsr_steps (`int`, *optional*, defaults to `0`):
            Every this many policy updates (at the generated batch that holds such an update), log the noise-to-signal
            ratio of the policy gradient with the Pass@k weight (`policy/gradient_nsr`, as the run trains) and without
            it (`policy/gradient_nsr_unweighted`, k = 1 on the same rollouts and values): the replicas are the batch's
            rollouts, each one's gradient alone at the policy that generated them
            (`trl_srppo.method.gradient_noise`). It costs one forward and backward pass per rollout of the batch and
            two float32 copies of the trainable parameters while it runs; it needs the whole policy on each process
            (not ZeRO-3 or FSDP). `0` (the default): never.

        > Parameters that choose the prompts to generate for (`docs/training.md#prompt-sampling`)

        prompt_sampling (`str`, *optional*, defaults to `"none"`):
            `"none"`: one rollout for every prompt of the batch, as SR-PPO. `"pass_at_k"`: the data loader gives a pool
            of `prompt_pool_factor` times the batch's prompts, the critic values each prompt alone (`qhat(s_0)`),
            and the batch's `B` prompts are drawn from the pool, with replacement, with probability
            `p_i = (1 - eps) w_i / sum_j w_j + eps / N` (`w_i = w_k(qhat(s_0))`, `N` the pool's size, `eps` =
            `prompt_sampling_floor`); each drawn rollout's Pass@k weight becomes the importance weight
            `w_i / (N p_i)`, so the expected gradient is SR-PPO's over the whole pool. `"near_half"`: the `B` prompts
            of the pool whose `qhat(s_0)` is nearest 0.5, each with its plain Pass@k weight (biased: a curriculum,
            not an estimate of SR-PPO's gradient). Needs the sigmoid critic and one rollout per prompt.
        prompt_pool_factor (`int`, *optional*, defaults to `4`):
            `m`, the pool's size in batches: each process values `m` times its generated batch's prompts and generates
            for as many as before. An epoch passes over the data once as candidates, so it has `m` times fewer
            updates. Must be `>= 2` for `"near_half"` (with `m = 1` it keeps every prompt).
        prompt_sampling_floor (`float`, *optional*, defaults to `0.1`):
            `eps` in `[0, 1]`, the uniform share of the `"pass_at_k"` draw: `0` draws by the weights alone (every
            drawn rollout then has the pool's mean weight; a prompt of weight 0 is never drawn), `1` is the uniform
            draw (the weights stay the plain Pass@k ones), anything above 0 keeps every prompt reachable.

        > Parameters that control the outcome

        srppo_outcome (`str`, *optional*, defaults to `"weighted_sum"`):
            How the outcome `Y` of a rollout is made from the reward functions' scores (GRPO logs every function as
            usual whichever is chosen). `"weighted_sum"`: the sum weighted by `reward_weights`, as GRPO sums them;
            with the sigmoid critic it must lie in `[0, 1]`. `"normalized_sum"`: that sum divided by its largest
            possible value (for reward functions valued in `[0, srppo_outcome_reward_max]`; with negative weights,
            mapped from its whole range onto `[0, 1]`), for pipelines that add several `[0, 1]` rewards, such as a
            format and an accuracy reward. `"reward_func"`: the score of the one function named by
            `srppo_outcome_reward_func` is the success signal.
        srppo_outcome_reward_func (`str`, *optional*):
            With `srppo_outcome="reward_func"`, the name of the reward function that says whether a rollout
            succeeded, as GRPO logs it (`rewards/<name>/mean`: a function's `__name__`, or a reward model's id).
        srppo_outcome_reward_max (`list[float]`, *optional*):
            With `srppo_outcome="normalized_sum"`, the largest value of each reward function, in the order of
            `reward_funcs`; 1 for every function when unset.
        srppo_outcome_threshold (`float`, *optional*):
            If set, the outcome is binary: 1 where the value chosen by `srppo_outcome` is at least this threshold,
            else 0. Makes any reward, a reward model's raw score included, a success signal for the sigmoid critic.
        scale_rewards (`str`, *optional*, defaults to `"none"`):
            GRPO's group scaling of advantages. SR-PPO's advantages come from the critic, not from group
            statistics, so they are never scaled; any other value only triggers a warning.

        > Parameters that control the critic

        critic_type (`str`, *optional*, defaults to `"separate"`):
            Where the critic lives (`docs/critics.md` compares them). Supported values are:

            - `"separate"`: a second model with a value head, started from `critic_model_name_or_path` or the policy.
            - `"policy_head"`: a linear value head on the policy's last hidden states (detached); no second model.
            - `"policy_lora"`: for a LoRA policy, a second LoRA adapter on the policy's base model, with a value head.
            - `"running_mean"`: no network: one value for every prefix, the running mean of the outcomes
              (`critic_running_mean_decay`). The control that measures what a learned critic adds; the Pass@k weight
              is then one factor for the whole batch.
        critic_model_name_or_path (`str`, *optional*):
            Checkpoint the critic starts from: a Hub id or a local folder, either a causal LM (a fresh value head is
            added) or a critic saved by this trainer: its `critic/` folder, a run's `output_dir` or `checkpoint-N`
            (whose `critic/` is read), or `org/name/critic` for a run pushed to the Hub. Hub files are read at
            `model_init_kwargs["revision"]` when it is set (as the policy's and TRL's reward models). A saved critic
            loads with the `critic_type` that saved it (another is refused with an error). Defaults to the policy's
            checkpoint. A `critic_model` passed to the trainer takes precedence.
        critic_head (`str`, *optional*):
            `"sigmoid"`: values are probabilities `qhat = sigmoid(f(s))` (SR-PPO). `"linear"`: unconstrained values
            (the PPO baseline). Defaults to the method's preset.
        critic_loss_type (`str`, *optional*):
            `"bce_mse"` (binary cross-entropy + `critic_mse_coef` x squared error, SR-PPO), `"bce"` or `"mse"` (the
            PPO baseline). The BCE losses need the sigmoid head. Defaults to the method's preset.
        critic_mse_coef (`float`, *optional*, defaults to `1.0`):
            Weight of the squared-error term of the critic loss (not given in the paper).
        critic_learning_rate (`float`, *optional*):
            Learning rate of the critic's AdamW optimizer (not given in the paper). Defaults to `CRITIC_LR_RATIO` (1)
            times the policy's `learning_rate`, so that it follows a user's choice of the policy's.
        critic_head_learning_rate (`float`, *optional*):
            Learning rate of the critic's value head, the linear layer that writes its value (the whole critic for
            `critic_type="policy_head"`). Defaults to `critic_learning_rate`. A fresh head starts at zero and AdamW
            moves each of its weights by about the learning rate per step, so at a policy-sized rate its values
            hardly differ between prompts for many steps, and neither does the Pass@k weight
            (`reports/real_study/README.md`); a higher head rate lets the critic tell prompts apart sooner.
        critic_running_mean_decay (`float`, *optional*, defaults to `0.5`):
            With `critic_type="running_mean"`, the share of the mean each batch keeps: after a batch the value is
            `decay * value + (1 - decay) * success rate` (0: the last batch's rate alone). Not measured: 0.5 averages
            about the last three batches.
        critic_weight_decay (`float`, *optional*, defaults to `0.0`):
            Weight decay of the critic's optimizer.
        critic_lr_scheduler_type (`str`, *optional*):
            Learning-rate schedule of the critic; defaults to the policy's `lr_scheduler_type`, with the policy's
            warm-up ratio or steps.
        critic_epochs (`int`, *optional*, defaults to `1`):
            Passes the critic makes over each generated batch. Each pass is split into as many optimizer steps as the
            policy makes per generated batch (`steps_per_generation / gradient_accumulation_steps`, at least one).
        critic_fused_forward (`bool`, *optional*, defaults to `True`):
            When the critic makes a single optimizer step per generated batch (`critic_epochs=1` and one policy
            optimizer step per generated batch) and has no active dropout, take the values for the advantages
            (detached, before the step) and the critic's loss from the same forward pass, saving one forward of the
            critic per batch. The results are those of separate passes; `False` forces the separate passes.
        critic_value_init (`str`, *optional*, defaults to `"success_rate"`):
            Where a freshly added value head starts. `"success_rate"`: on the first generated batch, before any value
            is read, the head's bias is set so that every prefix's value is that batch's success rate (its mean
            outcome, kept within `[1/(2N), 1 - 1/(2N)]` for `N` rollouts), the policy's base rate, instead of 0.5.
            `"zero"`: the head outputs 0 (probability 0.5 for the sigmoid critic). A critic loaded from a saved
            critic, or resumed from a checkpoint, keeps its head either way. Under `critic_parallelism="deepspeed"`
            the engine's float32 master copy of the head is set too.
        critic_warmup_steps (`int`, *optional*, defaults to `0`):
            Critic-only warm-up: for the first `critic_warmup_steps` optimizer steps, rollouts are generated and the
            critic learns from them, but the policy does not move (its optimizer skips these steps: no gradient, no
            weight decay, no Adam state). The policy's learning-rate schedule still counts them.
        critic_warm_start_prompts (`int`, *optional*, defaults to `0`):
            Offline warm start of the critic (the value cold start: a fresh value head gives every prompt nearly one
            value for many updates, so the Pass@k weight is the same for all). Before the first policy update, this
            many training prompts, drawn at random with `seed` (rounded up so that their rollouts fill whole generated
            batches), each get `critic_warm_start_samples` rollouts from the starting policy, through the run's own
            generation and reward functions, and the critic makes `critic_warm_start_epochs` passes over them. The
            policy does not move. Its cost is logged with the first step: `critic/warm_start_tokens` (generated
            tokens), `critic/warm_start_seconds`, `critic/warm_start_completions`. `0` (the default): no warm start.
            A resumed run does not warm start again.
        critic_warm_start_samples (`int`, *optional*, defaults to `4`):
            Rollouts per prompt of the warm start.
        critic_warm_start_epochs (`int`, *optional*, defaults to `1`):
            Passes of the critic over the warm start's rollouts, each generated batch's update as an online one
            (`critic_epochs` passes of its optimizer steps).
        critic_cliprange_value (`float`, *optional*):
            If set, PPO-style value clipping: the critic loss is the larger of the loss at the new value and at the
            old value plus the change clipped to `[-c, c]` (values in probability units for a sigmoid head).
        critic_parallelism (`str`, *optional*, defaults to `"auto"`):
            How the critic is spread over processes. `"accelerate"`: prepared by Accelerate like a policy (DDP).
            `"replicate"`: a whole copy on every process kept identical by torch DDP, outside DeepSpeed/FSDP.
            `"fsdp"`: sharded over all processes with FSDP2 (`fully_shard` per decoder layer and at the root), so each
            of N processes holds 1/N of its weights, gradients and optimizer state; `critic/` is still saved whole,
            and checkpoints resume on any number of processes, in this mode or a whole one (`"accelerate"`,
            `"replicate"`, whose checkpoints also resume here). Works beside any policy backend (not with
            `critic_use_peft`). `"deepspeed"`: the critic in its own DeepSpeed engine, with the policy's ZeRO stage
            and offload settings when the policy runs under DeepSpeed (`critic_zero_stage` otherwise), so ZeRO
            partitions its optimizer state, gradients and (stage 3) weights; `critic/` is still saved whole, and
            checkpoints hold the engine's own checkpoint, which resumes on another number of processes through
            DeepSpeed's universal checkpoint (converted once, on resume) under the same ZeRO stage. Needs the
            `deepspeed` extra; works beside any policy backend. `"auto"`: `"deepspeed"` when the policy runs under
            DeepSpeed ZeRO-2 or ZeRO-3, `"fsdp"` under FSDP (`"replicate"` for a LoRA critic, or beside ZeRO-0/1),
            `"accelerate"` otherwise. In every mode the critic's forward runs in bf16 when `bf16=True` (with
            `"fsdp"`, FSDP2's mixed precision: bf16 compute, float32 reduction; with `"deepspeed"`, DeepSpeed's bf16:
            bf16 weights, float32 master weights in the optimizer).
        critic_zero_stage (`int`, *optional*, defaults to `2`):
            ZeRO stage of the critic's DeepSpeed engine (`critic_parallelism="deepspeed"`) when the policy does not
            run under DeepSpeed: 1, 2 or 3 (stage 0 partitions nothing: `critic_parallelism="replicate"` is that
            critic). Beside a DeepSpeed policy the critic takes the policy's stage.
        critic_dtype (`str`, *optional*, defaults to `"float32"`):
            Dtype of the critic's weights (and so of what its optimizer updates): `"float32"` or `"bfloat16"`,
            whatever dtype the policy is loaded in. bf16 weights halve the memory but lose small updates (AdamW runs
            on them, with no float32 master copy). The `"deepspeed"` critic follows DeepSpeed's bf16 instead: with
            `bf16=True` or `"bfloat16"` here, it holds bf16 weights and float32 master weights in its optimizer, so
            no update is lost and the memory is not halved (`recipes/README.md`, "Memory per GPU").
        critic_gradient_checkpointing (`bool`, *optional*):
            Gradient checkpointing for the critic; defaults to the policy's `gradient_checkpointing`.
        critic_use_peft (`bool`, *optional*, defaults to `False`):
            Train the critic as a LoRA adapter (the value head is trained in full).
        critic_lora_r (`int`, *optional*):
            LoRA rank of the critic. Defaults to `16`, or with `critic_type="policy_lora"` to the policy adapter's.
        critic_lora_alpha (`int`, *optional*):
            LoRA alpha of the critic. Defaults to `32`, or with `critic_type="policy_lora"` to the policy adapter's.
        critic_lora_dropout (`float`, *optional*, defaults to `0.0`):
            LoRA dropout of the critic (must be 0 with `critic_type="policy_lora"`).
        critic_lora_target_modules (`list[str]`, *optional*):
            Modules the critic's LoRA adapts; defaults to `"all-linear"`, or with `critic_type="policy_lora"` to the
            policy adapter's.

        > Parameters that bound a run's faults

        `reward_timeout` and `save_on_preemption` are the runtime's ([`~trl_srppo.runtime.config.RuntimeConfig`]),
        which `trainer: grpo` takes too.
    """

    # Parameters that select the method
    srppo_method: str = field(
        default="sr-ppo",
        metadata={
            "help": "Which of the paper's methods to run: 'sr-ppo', 'sr-ppo-pass1', 'ppo' or 'td'. Fills pass_at_k, "
            "gae_lambda, critic_head and critic_loss_type where they are left unset.",
        },
    )
    num_generations: int | None = field(
        default=1,
        metadata={
            "help": "Rollouts per prompt. SR-PPO needs only one; with more, each rollout still gets its own "
            "critic-based advantage."
        },
    )

    # Parameters that control the advantage
    pass_at_k: int | None = field(
        default=None,
        metadata={"help": "The k of the Pass@k objective; 1 means plain expected reward. Defaults to the preset."},
    )
    gae_lambda: float | None = field(
        default=None,
        metadata={
            "help": "GAE lambda in [0, 1] (gamma = 1): 1.0 is the Monte Carlo advantage of SR-PPO and PPO, 0.0 the "
            "one-step TD ablation. Defaults to the preset."
        },
    )
    advantage_baseline: str = field(
        default="prefix",
        metadata={
            "help": "'prefix' (each token against the value of the prefix before it, SR-PPO) or 'prompt' (every "
            "token against the value of the prompt, qhat(s_0)).",
        },
    )
    pass_at_k_normalize: bool = field(
        default=False,
        metadata={
            "help": "Divide the Pass@k weights by their mean over the generated batch, so they re-weight prompts "
            "without scaling the step."
        },
    )
    gradient_nsr_steps: int = field(
        default=0,
        metadata={
            "help": "Every this many policy updates, log the policy gradient's noise-to-signal ratio with and without "
            "the Pass@k weight (policy/gradient_nsr, policy/gradient_nsr_unweighted); 0: never."
        },
    )

    # Parameters that choose the prompts to generate for
    prompt_sampling: str = field(
        default="none",
        metadata={
            "help": "'none' (every prompt of the batch), 'pass_at_k' (draw the batch from a pool of "
            "prompt_pool_factor batches by the critic's Pass@k weight, with importance weights) or 'near_half' (keep "
            "the prompts whose qhat(s_0) is nearest 0.5).",
        },
    )
    prompt_pool_factor: int = field(
        default=4, metadata={"help": "m: the pool of candidate prompts is m times the generated batch's prompts."}
    )
    prompt_sampling_floor: float = field(
        default=0.1,
        metadata={
            "help": "eps in [0, 1]: the uniform share of the 'pass_at_k' draw (1: uniform; 0: by weight alone)."
        },
    )

    # Parameters that control the outcome
    srppo_outcome: str = field(
        default="weighted_sum",
        metadata={
            "help": "How the outcome of a rollout is made from the reward functions: 'weighted_sum' (must be in "
            "[0, 1] for the sigmoid critic), 'normalized_sum' (the weighted sum over its maximum) or 'reward_func' "
            "(the function named by srppo_outcome_reward_func).",
        },
    )
    srppo_outcome_reward_func: str | None = field(
        default=None,
        metadata={"help": "With srppo_outcome='reward_func': the name of the reward function that signals success."},
    )
    srppo_outcome_reward_max: list[float] | None = field(
        default=None,
        metadata={
            "help": "With srppo_outcome='normalized_sum': the largest value of each reward function (1 each if unset)."
        },
    )
    srppo_outcome_threshold: float | None = field(
        default=None,
        metadata={"help": "If set, the outcome is 1 where it reaches this threshold and 0 elsewhere."},
    )
    scale_rewards: str = field(
        default="none",
        metadata={
            "help": "GRPO's advantage scaling; SR-PPO never scales its critic-based advantages (other values warn)."
        },
    )

    # Parameters that control the critic
    critic_type: str = field(
        default="separate",
        metadata={
            "help": "'separate' (a critic model of its own), 'policy_head' (a small value head on the policy's own "
            "hidden states, no second model), 'policy_lora' (a second LoRA adapter and a value head on a LoRA "
            "policy's base model, held once) or 'running_mean' (no network: the outcomes' running mean).",
        },
    )
    critic_model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Checkpoint the critic starts from (Hub id or folder). Defaults to the policy's."},
    )
    critic_head: str | None = field(
        default=None,
        metadata={
            "help": "'sigmoid' (SR-PPO) or 'linear' (PPO baseline). Defaults to the preset.",
        },
    )
    critic_loss_type: str | None = field(
        default=None,
        metadata={
            "help": "'bce_mse' (SR-PPO), 'bce' or 'mse' (PPO baseline). Defaults to the preset.",
        },
    )
    critic_mse_coef: float = field(
        default=1.0, metadata={"help": "Weight of the squared-error term of the critic loss."}
    )
    critic_learning_rate: float | None = field(
        default=None,
        metadata={"help": "Learning rate of the critic's optimizer. Defaults to the policy's learning_rate."},
    )
    critic_head_learning_rate: float | None = field(
        default=None,
        metadata={"help": "Learning rate of the critic's value head. Defaults to critic_learning_rate."},
    )
    critic_running_mean_decay: float = field(
        default=0.5,
        metadata={"help": "critic_type='running_mean': the share of the mean each batch keeps (0: the last batch's)."},
    )
    critic_weight_decay: float = field(default=0.0, metadata={"help": "Weight decay of the critic's optimizer."})
    critic_lr_scheduler_type: str | None = field(
        default=None, metadata={"help": "Learning-rate schedule of the critic; defaults to the policy's."}
    )
    critic_epochs: int = field(default=1, metadata={"help": "Passes the critic makes over each generated batch."})
    critic_fused_forward: bool = field(
        default=True,
        metadata={
            "help": "With one critic optimizer step per generated batch, take the values for the advantages and the "
            "critic's loss from one forward pass (same results, one forward fewer); a policy head reads its values "
            "from a forward the policy makes anyway. False forces separate passes."
        },
    )
    critic_value_init: str = field(
        default="success_rate",
        metadata={
            "help": "Where a fresh value head starts: 'success_rate' (the first generated batch's success rate) or "
            "'zero' (output 0: probability 0.5 for the sigmoid critic).",
        },
    )
    critic_warmup_steps: int = field(
        default=0,
        metadata={"help": "Policy optimizer steps at the start during which only the critic learns."},
    )
    critic_warm_start_prompts: int = field(
        default=0,
        metadata={
            "help": "Training prompts whose rollouts from the starting policy the critic learns from before the "
            "first policy update (0: no warm start)."
        },
    )
    critic_warm_start_samples: int = field(default=4, metadata={"help": "Rollouts per prompt of the warm start."})
    critic_warm_start_epochs: int = field(
        default=1, metadata={"help": "Passes of the critic over the warm start's rollouts."}
    )
    critic_cliprange_value: float | None = field(
        default=None, metadata={"help": "If set, PPO-style value clipping range of the critic."}
    )
    critic_parallelism: str = field(
        default="auto",
        metadata={
            "help": "'accelerate' (prepared like the policy), 'replicate' (torch DDP copy beside a DeepSpeed/FSDP "
            "policy), 'fsdp' (sharded over the processes with FSDP2), 'deepspeed' (its own DeepSpeed ZeRO engine) "
            "or 'auto' ('deepspeed' under DeepSpeed ZeRO-2/3, 'fsdp' under FSDP, 'replicate' for a LoRA critic "
            "there or beside ZeRO-0/1, 'accelerate' otherwise).",
        },
    )
    critic_zero_stage: int = field(
        default=2,
        metadata={
            "help": "ZeRO stage of the critic's DeepSpeed engine (critic_parallelism='deepspeed') when the policy "
            "does not run under DeepSpeed: 1, 2 or 3 (stage 0 partitions nothing: critic_parallelism='replicate' is "
            "that critic). Beside a DeepSpeed policy the critic takes the policy's stage."
        },
    )
    critic_dtype: str = field(
        default="float32",
        metadata={
            "help": "Dtype of the critic's weights: 'float32' or 'bfloat16' (no float32 master copy, except under "
            "critic_parallelism='deepspeed', whose bf16 keeps one).",
        },
    )
    critic_gradient_checkpointing: bool | None = field(
        default=None, metadata={"help": "Gradient checkpointing for the critic; defaults to the policy's setting."}
    )
    critic_use_peft: bool = field(default=False, metadata={"help": "Train the critic as a LoRA adapter."})
    critic_lora_r: int | None = field(
        default=None,
        metadata={"help": "LoRA rank of the critic; defaults to 16, or to the policy adapter's with 'policy_lora'."},
    )
    critic_lora_alpha: int | None = field(
        default=None,
        metadata={"help": "LoRA alpha of the critic; defaults to 32, or to the policy adapter's with 'policy_lora'."},
    )
    critic_lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout of the critic."})
    critic_lora_target_modules: list[str] | None = field(
        default=None, metadata={"help": "Modules the critic's LoRA adapts; defaults to 'all-linear'."}
    )

    def __post_init__(self):
        rollouts = self.num_generations
        if not isinstance(rollouts, int) or isinstance(rollouts, bool) or rollouts < 1:
            raise ValueError(
                f"num_generations must be an integer >= 1 (rollouts per prompt; SR-PPO needs only 1), got "
                f"{rollouts!r}."
            )
        with single_rollout_checks(self) if rollouts == 1 else contextlib.nullcontext():
            super().__post_init__()  # the runtime's checks (RuntimeConfig), then GRPOConfig's
        self._default_inherited_fields()
        self._apply_method_preset()
        self._check_choices()
        self._check_advantage()
        self._check_outcome()
        self._check_advantage_baseline()
        self._check_critic_objective()
        self._check_critic_optimization()
        self._check_critic_type()
        self._check_prompt_sampling()

    def _default_inherited_fields(self) -> None:
        """Set the inherited fields that SR-PPO reads differently, where the user left them unset."""
        if self.ddp_find_unused_parameters is None and self._own_critic_model():
            # Every parameter of the policy takes part in its loss, and the critic is a model of its own: DDP need not
            # search for unused parameters (Trainer's default without checkpointing, which then warns at each step).
            self.ddp_find_unused_parameters = False

    def _own_critic_model(self) -> bool:
        # Whether the critic is a model of its own; `False` for a `critic_type` outside the registry, which
        # `_check_choices` refuses next.
        return self.critic_type in CRITIC_TYPES and CRITIC_TYPES[self.critic_type].own_model

    def _apply_method_preset(self) -> None:
        """Fill the fields the `srppo_method` preset sets that the user left unset (an unknown method has none: it is
        refused next, by `_check_choices`)."""
        for name, value in METHOD_PRESETS.get(self.srppo_method, {}).items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def _check_choices(self) -> None:
        """Refuse a value of a choice field outside its registry (`CHOICES`), with the one message
        `<field> must be 'a', 'b' or 'c', got 'x'.`; `srppo_method` first, whose preset fills some of the others."""
        for name, registry in CHOICES.items():
            registry.check(getattr(self, name))

    def _check_advantage(self) -> None:
        """Refuse a `pass_at_k` or `gae_lambda` out of range."""
        if not isinstance(self.pass_at_k, int) or isinstance(self.pass_at_k, bool) or self.pass_at_k < 1:
            raise ValueError(
                f"pass_at_k must be an integer >= 1 (1 is plain expected reward), got {self.pass_at_k!r}."
            )
        if not 0.0 <= float(self.gae_lambda) <= 1.0:
            raise ValueError(f"gae_lambda must be in [0, 1] (1.0 is Monte Carlo, 0.0 is TD), got {self.gae_lambda}.")

    def _check_outcome(self) -> None:
        """Refuse the outcome fields that do not go with `srppo_outcome`."""
        outcome = OUTCOME_MODES[self.srppo_outcome]
        if outcome.needs_reward_func != (self.srppo_outcome_reward_func is not None):
            raise ValueError(
                "srppo_outcome='reward_func' and srppo_outcome_reward_func go together: name the reward function "
                "that signals success in srppo_outcome_reward_func and set srppo_outcome='reward_func'; got "
                f"srppo_outcome={self.srppo_outcome!r}, srppo_outcome_reward_func={self.srppo_outcome_reward_func!r}."
            )
        if self.srppo_outcome_reward_max is not None:
            if not outcome.reads_reward_max:
                raise ValueError(
                    "srppo_outcome_reward_max is only used with srppo_outcome='normalized_sum'; set that, or unset it."
                )
            if any(m <= 0 for m in self.srppo_outcome_reward_max):
                raise ValueError(
                    "srppo_outcome_reward_max must be > 0 for every reward function, got "
                    f"{self.srppo_outcome_reward_max}."
                )

    def _check_advantage_baseline(self) -> None:
        """Refuse `advantage_baseline="prompt"` without the Monte Carlo advantage."""
        if ADVANTAGE_BASELINES[self.advantage_baseline].monte_carlo and float(self.gae_lambda) != 1.0:
            raise ValueError(
                f"advantage_baseline={self.advantage_baseline!r} uses the Monte Carlo advantage Y - qhat(s_0), so "
                f"gae_lambda must be 1.0, got {self.gae_lambda}; set gae_lambda=1.0 (or srppo_method other than "
                "'td'), or use advantage_baseline='prefix'."
            )

    def _check_critic_objective(self) -> None:
        """Refuse the critic losses and the `pass_at_k` that need probabilities without the sigmoid head."""
        probabilities = CRITIC_HEADS[self.critic_head].logits  # the values are probabilities
        if CRITIC_LOSSES[self.critic_loss_type].probabilities and not probabilities:
            raise ValueError(
                f"critic_loss_type={self.critic_loss_type!r} needs probabilities: set critic_head='sigmoid', or use "
                "critic_loss_type='mse' with the linear head."
            )
        if self.pass_at_k > 1 and not probabilities:
            raise ValueError(
                f"pass_at_k={self.pass_at_k} reads a success probability from the critic, which needs "
                "critic_head='sigmoid'; set pass_at_k=1 for the linear (PPO) critic."
            )

    def _check_critic_optimization(self) -> None:
        """Default the critic's learning rate to the policy's (times `CRITIC_LR_RATIO`); refuse critic training
        settings out of range, and `load_best_model_at_end`, which would not restore the critic."""
        if self.critic_learning_rate is None:
            self.critic_learning_rate = CRITIC_LR_RATIO * self.learning_rate
        if self.critic_learning_rate <= 0:
            raise ValueError(f"critic_learning_rate must be > 0, got {self.critic_learning_rate}.")
        if self.critic_head_learning_rate is not None and self.critic_head_learning_rate <= 0:
            raise ValueError(
                f"critic_head_learning_rate must be > 0, got {self.critic_head_learning_rate}; leave it unset for "
                "the critic's learning rate."
            )
        if self.critic_mse_coef < 0:
            raise ValueError(f"critic_mse_coef must be >= 0, got {self.critic_mse_coef}.")
        if self.critic_epochs < 1:
            raise ValueError(f"critic_epochs must be >= 1, got {self.critic_epochs}.")
        if self.critic_warmup_steps < 0:
            raise ValueError(f"critic_warmup_steps must be >= 0, got {self.critic_warmup_steps}.")
        if self.gradient_nsr_steps < 0:
            raise ValueError(f"gradient_nsr_steps must be >= 0 (0: never), got {self.gradient_nsr_steps}.")
        if self.critic_warm_start_prompts < 0:
            raise ValueError(
                f"critic_warm_start_prompts must be >= 0 (0: no warm start), got {self.critic_warm_start_prompts}."
            )
        for name in ("critic_warm_start_samples", "critic_warm_start_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.critic_cliprange_value is not None and self.critic_cliprange_value <= 0:
            raise ValueError(
                "critic_cliprange_value must be > 0, or None to disable value clipping; got "
                f"{self.critic_cliprange_value}."
            )
        if self.load_best_model_at_end:
            raise ValueError(
                "load_best_model_at_end=True would restore the best policy but not its critic; set it to False and "
                "pick the checkpoint (policy and critic/ together) from the evaluation logs."
            )

    def _check_critic_type(self) -> None:
        """Refuse the settings a critic on the policy cannot take; default the LoRA rank and alpha of a critic that
        does not take the policy adapter's."""
        critic_type = CRITIC_TYPES[self.critic_type]
        if not critic_type.has_network:
            self._check_running_mean()
        settings = {  # whether each setting a critic type may fix is set
            "critic_use_peft": self.critic_use_peft,
            "critic_parallelism": not CRITIC_PARALLELISMS[self.critic_parallelism].automatic,
            "critic_lora_dropout": self.critic_lora_dropout != 0,
        }
        bad = [name for name, value in settings.items() if value and name in critic_type.fixed_settings]
        if bad:
            raise ValueError(critic_type.refusal.format(bad=bad))
        if self.critic_lora_r is not None and self.critic_lora_r < 1:
            raise ValueError(f"critic_lora_r must be >= 1, got {self.critic_lora_r}.")
        if not critic_type.policy_adapter:  # a critic adapter on the policy takes the policy adapter's where unset
            self.critic_lora_r = 16 if self.critic_lora_r is None else self.critic_lora_r
            self.critic_lora_alpha = 32 if self.critic_lora_alpha is None else self.critic_lora_alpha

    def _check_running_mean(self) -> None:
        """Refuse what a running mean cannot take: a decay outside `[0, 1)`, or bootstrapped targets."""
        if not 0.0 <= float(self.critic_running_mean_decay) < 1.0:
            raise ValueError(
                "critic_running_mean_decay must be in [0, 1) (the share of the mean each batch keeps), got "
                f"{self.critic_running_mean_decay}."
            )
        if float(self.gae_lambda) != 1.0:
            raise ValueError(
                f"critic_type='running_mean' learns the mean outcome and values every prefix alike, so there is "
                f"nothing to bootstrap from: gae_lambda must be 1.0, got {self.gae_lambda} (srppo_method "
                f"{self.srppo_method!r}). Use srppo_method='sr-ppo' or 'sr-ppo-pass1'."
            )

    def _check_prompt_sampling(self) -> None:
        """Refuse prompt-sampling settings that cannot work, naming the fix."""
        factor = self.prompt_pool_factor
        if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
            raise ValueError(
                f"prompt_pool_factor must be an integer >= 1 (the pool's size in generated batches), got {factor!r}."
            )
        if not 0.0 <= float(self.prompt_sampling_floor) <= 1.0:
            raise ValueError(
                "prompt_sampling_floor must be in [0, 1] (0: draw by the Pass@k weight alone; 1: uniform), got "
                f"{self.prompt_sampling_floor}."
            )
        sampling = PROMPT_SAMPLING_MODES[self.prompt_sampling]
        if not sampling.draws:
            return
        if not CRITIC_HEADS[self.critic_head].logits:
            raise ValueError(
                f"prompt_sampling={self.prompt_sampling!r} reads each prompt's success probability qhat(s_0) from the "
                f"critic, which needs critic_head='sigmoid' (this run has {self.critic_head!r}); use "
                "prompt_sampling='none' with the linear (PPO) critic."
            )
        if self.num_generations != 1:
            raise ValueError(
                f"prompt_sampling={self.prompt_sampling!r} draws prompts for one rollout each, and a prompt drawn "
                f"twice gets two; set num_generations=1 (this run has {self.num_generations}), or "
                "prompt_sampling='none'."
            )
        if factor < sampling.min_pool_factor:
            raise ValueError(sampling.small_pool)
