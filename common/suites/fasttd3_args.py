"""FastTD3's published arguments for MuJoCo Playground (Seo et al. 2025, arXiv:2505.22642;
younggyoseo/FastTD3 `fast_td3/hyperparams.py`, its networks in `fast_td3/fast_td3.py`), as the
Playground adapter's TD3 recipes hold them (the Brax adapter's take its DM Control ones), and
their translation into scanrl's TD3 fields (common/suites/recipes.py's `lookup` applies it).

FastTD3 counts in vector steps (one step of every environment): `total_timesteps`,
`learning_starts` and `buffer_size` (rows per environment) are vector steps; scanrl's fields
count env steps per seed, so the translation multiplies them by `num_envs`. Its `num_steps` is
the n-step horizon and `num_updates` the gradient steps per vector step.

The `cpu` form (common/suites/recipes.py) divides `num_envs` and `batch_size` by the same factor and
keeps everything else: the vector steps, the rows per environment, the gradient steps per
vector step, so the replay ratio (samples per env step, 2 x 32,768 / 1,024 = 64) stays as
published. Not translated: bf16 autocast (`amp`; scanrl computes in float32), `init_scale`
(scanrl's actor head is orthogonal with gain 0.01 where FastTD3 draws normal(0, 0.01)), and
FastTD3's asymmetric critic for the humanoids (scanrl's TD3 reads the policy's `state` part in
both networks).
"""

from __future__ import annotations

SOURCE = "younggyoseo/FastTD3 fast_td3/hyperparams.py"

# BaseArgs with MuJoCoPlaygroundArgs' changes, in FastTD3's names
PLAYGROUND = dict(
    num_envs=1024, num_eval_envs=1024, total_timesteps=1_500_000, critic_learning_rate=3e-4,
    actor_learning_rate=3e-4, buffer_size=1024 * 10, num_steps=1, gamma=0.97, tau=0.1,
    batch_size=32768, policy_noise=0.001, std_min=0.001, std_max=0.4, learning_starts=10,
    policy_frequency=2, noise_clip=0.5, num_updates=2, num_atoms=101, v_min=-10.0, v_max=10.0,
    critic_hidden_dim=1024, actor_hidden_dim=512, obs_normalization=True, max_grad_norm=0.0,
    weight_decay=0.1,
)
# the task classes' changes; CheetahRunArgs says it "will work for most DMC tasks", so the
# DM Control tasks without a class of their own take it too (common/suites/playground.py)
CHEETAH_RUN = dict(num_steps=3, v_min=-500.0, v_max=500.0, std_min=0.1, policy_noise=0.1)
GO1 = dict(total_timesteps=50_000, std_min=0.2, std_max=0.8, policy_noise=0.2, num_updates=8)
TASKS = {
    **{
        t: dict(total_timesteps=100_000)
        for t in (
            "G1JoystickFlatTerrain",
            "G1JoystickRoughTerrain",
            "T1JoystickFlatTerrain",
            "T1JoystickRoughTerrain",
        )
    },
    **{t: GO1 for t in ("Go1JoystickFlatTerrain", "Go1JoystickRoughTerrain", "Go1Getup")},
}


def fasttd3_args(task: str, dm_control: bool = False) -> dict:
    """FastTD3's arguments for a Playground task: MuJoCoPlaygroundArgs with the task's class (a DM
    Control task: CheetahRunArgs)."""
    return dict(PLAYGROUND, **(CHEETAH_RUN if dm_control else TASKS.get(task, {})))


def td3_fields(a: dict) -> dict:
    """scanrl's TD3 fields for FastTD3's arguments. Its critic and actor MLPs halve their width
    at each of three layers (1,024-512-256 and 512-256-128)."""
    if a["critic_learning_rate"] != a["actor_learning_rate"]:
        raise ValueError("scanrl's TD3 has one learning rate for both networks.")
    width = lambda w: (w, w // 2, w // 4)
    n = a["num_envs"]
    return dict(
        num_envs=n, total_timesteps=a["total_timesteps"] * n,
        learning_starts=a["learning_starts"] * n, buffer_size=a["buffer_size"] * n,
        batch_size=a["batch_size"], n_step=a["num_steps"], updates_per_step=a["num_updates"],
        policy_delay=a["policy_frequency"], learning_rate=a["critic_learning_rate"],
        weight_decay=a["weight_decay"], gamma=a["gamma"], tau=a["tau"], num_atoms=a["num_atoms"],
        v_min=a["v_min"], v_max=a["v_max"], exploration_noise_min=a["std_min"],
        exploration_noise_max=a["std_max"], target_noise=a["policy_noise"],
        target_noise_clip=a["noise_clip"], max_grad_norm=a["max_grad_norm"],
        normalize_obs=a["obs_normalization"], critic_hidden=width(a["critic_hidden_dim"]),
        actor_hidden=width(a["actor_hidden_dim"]), activation="relu",
        eval_episodes=a["num_eval_envs"],
    )


# TD3's own parts, which SAC replaces by its stochastic actor and learned temperature
TD3_ONLY = ("policy_delay", "exploration_noise_min", "exploration_noise_max", "target_noise",
            "target_noise_clip")


def sac_fields(a: dict) -> dict:
    """scanrl's SAC fields for FastTD3's arguments, FastSAC's move (arXiv:2512.01996): the same
    envs, batch, replay ratio, n-step, C51 critic, widths, weight decay, tau, gamma and
    observation normalisation; SAC's own parts (the learned temperature, its target entropy,
    the actor's log-std bounds) at sac.py's defaults. FastSAC's own further changes are not
    in it."""
    return {k: v for k, v in td3_fields(a).items() if k not in TD3_ONLY}


FIELDS = {"fast_td3": td3_fields, "fast_sac": sac_fields}  # Recipe.trainer -> its translation
