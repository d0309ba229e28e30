"""Brax's trainers' published arguments (`brax.training.agents.ppo.train` and `.sac.train`), as
the Brax and MuJoCo Playground adapters' recipes hold them, and their translation into scanrl's
Config fields (common/suites/recipes.py's `lookup` applies it; its docstring gives the size
mapping)."""

from __future__ import annotations

# Brax's trainers' own defaults (brax/training/agents/ppo/train.py, losses.py, networks.py),
# as scanrl's PPO fields: a tanh-squashed normal with a softplus std, clip 0.3, no value clip,
# no gradient clipping, no schedule, Adam eps 1e-8, a constant reward scale instead of
# running statistics, observation normalisation, policy 32x4 and value 256x5 swish MLPs.
BRAX_PPO = dict(
    action_dist="tanh_normal", min_std=0.001, clip_eps=0.3, clip_value_loss=False,
    max_grad_norm=0.0, anneal_lr=False, adam_eps=1e-8, gae_lambda=0.95, vf_coef=0.5,
    normalize_advantages=True, normalize_obs=True, normalize_reward=False,
    actor_hidden=(32, 32, 32, 32), critic_hidden=(256, 256, 256, 256, 256), activation="swish",
)
# brax/training/agents/sac: ReLU MLPs 256x256, tau 0.005, target entropy -A/2, obs normalisation
BRAX_SAC = dict(actor_hidden=(256, 256), critic_hidden=(256, 256), activation="relu", tau=0.005,
                target_entropy_scale=0.5, normalize_obs=True)


def ppo_args(
    num_envs: int, unroll_length: int, batch_size: int, num_minibatches: int,
    num_updates_per_batch: int, discounting: float, learning_rate: float, entropy_cost: float,
    reward_scaling: float, num_timesteps: int,
) -> dict:
    """Brax's `ppo.train` arguments, in its order of the notebook's configurations."""
    return dict(
        num_envs=num_envs, unroll_length=unroll_length, batch_size=batch_size,
        num_minibatches=num_minibatches, num_updates_per_batch=num_updates_per_batch,
        discounting=discounting, learning_rate=learning_rate, entropy_cost=entropy_cost,
        reward_scaling=float(reward_scaling), num_timesteps=num_timesteps, num_eval_envs=128,
    )


def sac_args(
    num_envs: int, batch_size: int, grad_updates_per_step: int, discounting: float,
    learning_rate: float, reward_scaling: float, min_replay_size: int, num_timesteps: int,
) -> dict:
    """Brax's `sac.train` arguments."""
    return dict(
        num_envs=num_envs, batch_size=batch_size, grad_updates_per_step=grad_updates_per_step,
        discounting=discounting, learning_rate=learning_rate, reward_scaling=float(reward_scaling),
        min_replay_size=min_replay_size, num_timesteps=num_timesteps, num_eval_envs=128,
    )


# Brax `ppo.train` arguments that some recipes change from Brax's defaults, and network_factory's
# keys (brax/training/agents/ppo/networks.py `make_ppo_networks`): scanrl's PPO field for each
PPO_OPTIONAL = dict(clipping_epsilon="clip_eps", max_grad_norm="max_grad_norm")
NETWORK_FIELDS = dict(
    policy_hidden_layer_sizes="actor_hidden", value_hidden_layer_sizes="critic_hidden",
    value_obs_key="critic_obs",
)


def ppo_fields(a: dict) -> dict:
    """scanrl's PPO fields for Brax `ppo.train` arguments (`ppo_args`, and any of PPO_OPTIONAL and
    `network_factory`'s NETWORK_FIELDS; its policy_obs_key is always "state")."""
    optional = {field: a[arg] for arg, field in PPO_OPTIONAL.items() if arg in a}
    optional.update({field: a["network_factory"][key] for key, field in NETWORK_FIELDS.items()
                     if key in a.get("network_factory", {})})
    return dict(
        BRAX_PPO, **optional, num_envs=a["num_envs"],
        num_steps=a["unroll_length"] * a["batch_size"] * a["num_minibatches"] // a["num_envs"],
        num_minibatches=a["num_minibatches"], num_epochs=a["num_updates_per_batch"],
        gamma=a["discounting"], learning_rate=a["learning_rate"], ent_coef=a["entropy_cost"],
        reward_scale=a["reward_scaling"], total_timesteps=a["num_timesteps"],
        eval_episodes=a["num_eval_envs"],
    )


def sac_fields(a: dict) -> dict:
    """scanrl's SAC fields for Brax `sac.train` arguments (`sac_args`, and network_factory's
    q_network_layer_norm where a recipe sets it)."""
    layer_norm = a.get("network_factory", {}).get("q_network_layer_norm", False)
    return dict(
        BRAX_SAC, critic_layer_norm=layer_norm, num_envs=a["num_envs"], batch_size=a["batch_size"],
        updates_per_step=a["grad_updates_per_step"], gamma=a["discounting"],
        learning_rate=a["learning_rate"], reward_scale=a["reward_scaling"],
        learning_starts=a["min_replay_size"], total_timesteps=a["num_timesteps"],
        eval_episodes=a["num_eval_envs"],
    )


FIELDS = {"ppo": ppo_fields, "sac": sac_fields}  # Recipe.trainer -> its translation
