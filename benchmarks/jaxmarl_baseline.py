#!/usr/bin/env python
"""Thin driver for one of JaxMARL's own baselines (FLAIROx/JaxMARL, baselines/): IPPO
(`IPPO/ippo_ff_mpe.py`, `ippo_ff_overcooked.py`), PQN-VDN (`QLearning/pqn_vdn_ff.py`, recurrent
`pqn_vdn_rnn.py`) or, on SMAX, recurrent IPPO and MAPPO (`IPPO/ippo_rnn_smax.py`,
`MAPPO/mappo_rnn_smax.py`), run
unchanged from its own file and YAML, scored as scanrl scores a run.

Run in a virtualenv with JaxMARL and its baselines' packages (benchmarks/jaxmarl_side_by_side.sh
makes it), with JAXMARL_DIR a checkout of FLAIROx/JaxMARL:

    python benchmarks/jaxmarl_baseline.py --script IPPO/ippo_ff_mpe.py \
        --config IPPO/config/ippo_ff_mpe.yaml --total-timesteps 2000000 --num-seeds 5 \
        --out ippo.json

What runs is the file's own `make_train(config)`, jitted and vmapped over the seeds as its
`main` does (IPPO: `jax.vmap(jax.jit(make_train(config)))(keys)`; the SMAX files: one seed after
another through one `jax.jit(make_train(config))`, as mappo_rnn_smax.py's main runs its one
seed; ippo_rnn_smax.py's main vmaps its seeds, but its per-update `io_callback` under `vmap`
hangs on a CPU (jax 0.10.2: a 2-seed run of 2 updates made no progress in 3 minutes); PQN-VDN:
`jax.jit(jax.vmap(make_train(config, env)))(keys)` with the env from its `env_from_config`, as
its `single_run` does; its recurrent form one seed after another through one
`jax.jit(make_train(config, env))`, since its vmapped seeds hang on a CPU (jax 0.10.2: 2 and 5
seeds of 2 updates stopped at about 21 s of CPU and made no progress in 100 s, where 1 seed
finishes in 21 s)), on
one CPU device; the YAML is read as its Hydra entry point reads it (QLearning: config.yaml with
the alg YAML merged over it), with TOTAL_TIMESTEPS and NUM_SEEDS set, wandb disabled and
PQN-VDN's tests during training off (TEST_DURING_TRAINING: each side evaluates once, at the
end, by the estimator below). The wall counts the imports, the compile and the run.

The score (the same estimator as scanrl's evaluation): after training, each seed's final policy,
through the file's own network (`ActorCritic`; PQN-VDN's `QNetwork` on its `CTRolloutManager`'s
observations, agent ids added), plays 128 fresh episodes of the env, and the score is the mean
over the episodes and the agents of each agent's first-episode return, with sampled actions
("sampled") and with the most probable one ("deterministic"; PQN-VDN: greedy in both, the
recurrent form's GRU state carried from zeros as its own tests carry it). On SMAX
the policy is the file's recurrent actor (`ActorCriticRNN`, MAPPO's `ActorRNN`) with its GRU
state carried from zeros and the env's available actions, and the fraction of battles won
(every enemy down, an ally standing: scanrl's `win_rate`) is recorded beside the return. That
evaluation is timed as scanrl's is (in the wall). The file's own training metric, the last
update's mean of `returned_episode_returns`, is recorded beside it.
"""
import argparse
import importlib.util
import json
import os
import sys
import time

START = time.perf_counter()
import sidebyside  # noqa: E402  benchmarks/, beside this file: scanrl_commit needs git only

JAXMARL_DIR = os.environ.get("JAXMARL_DIR", "JaxMARL")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--script", required=True, help="under baselines/, e.g. IPPO/ippo_ff_mpe.py")
    p.add_argument("--config", required=True, help="under baselines/, its YAML")
    p.add_argument("--total-timesteps", type=float, required=True)
    p.add_argument("--num-seeds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-episodes", type=int, default=128)
    p.add_argument("--layout", help="Overcooked: the layout's name, over the YAML's")
    p.add_argument("--map", help="SMAX: the map's name (MAP_NAME), over the YAML's")
    p.add_argument("--shaping-horizon", type=float,
                   help="Overcooked: REW_SHAPING_HORIZON over the YAML's (steps of all envs)")
    p.add_argument("--out", required=True)
    return p.parse_args()


def load(path: str):
    spec = importlib.util.spec_from_file_location("baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def env_kwargs(config):
    """The env's arguments as the file's `main` gives them: Overcooked's layout by its object."""
    kwargs = dict(config.get("ENV_KWARGS") or {})
    if config["ENV_NAME"] == "overcooked" and isinstance(kwargs.get("layout"), str):
        from jaxmarl.environments.overcooked import overcooked_layouts
        kwargs["layout"] = overcooked_layouts[kwargs["layout"]]
    return kwargs


def evaluate(module, config, params, key, episodes):
    """Each agent's first-episode return, mean over `episodes` fresh envs and the agents:
    (sampled, deterministic), by the baseline's own network and env."""
    import jax
    import jax.numpy as jnp
    import jaxmarl

    env = jaxmarl.make(config["ENV_NAME"], **env_kwargs(config))
    network = module.ActorCritic(env.action_space(env.agents[0]).n,
                                 activation=config["ACTIVATION"])

    def episode(key, deterministic):
        k_reset, key = jax.random.split(key)
        obs, state = env.reset(k_reset)

        def step(carry, key):
            obs, state, total, running = carry
            k_act, k_env = jax.random.split(key)
            # flat, as the file's own rollout batches them (Overcooked's [H, W, C] grids)
            batch = jnp.stack([obs[a].reshape(-1) for a in env.agents])
            pi, _ = network.apply(params, batch)
            action = jnp.where(deterministic, pi.mode(), pi.sample(seed=k_act))
            obs, state, reward, dones, _ = env.step(
                k_env, state, {a: action[i] for i, a in enumerate(env.agents)})
            reward = jnp.stack([reward[a] for a in env.agents])
            total = total + running * reward
            running = running & ~dones["__all__"]
            return (obs, state, total, running), None

        # MPE ends an episode on the step that finds max_steps already taken: max_steps + 1
        # rewards (26 on MPE), and a step after the end adds nothing (`running`)
        limit = int(getattr(env, "max_steps", 1000)) + 1
        (_, _, total, _), _ = jax.lax.scan(
            step, (obs, state, jnp.zeros(env.num_agents), jnp.bool_(True)),
            jax.random.split(key, limit))
        return total.mean()

    keys = jax.random.split(key, episodes)
    run = jax.jit(jax.vmap(episode, in_axes=(0, None)), static_argnums=1)
    return float(run(keys, False).mean()), float(run(keys, True).mean())


def evaluate_rnn(module, config, params, key, episodes):
    """SMAX's recurrent actor: (sampled return, deterministic return, sampled win rate,
    deterministic win rate), each agent's first-episode return and each env's first battle,
    mean over `episodes` fresh envs (and the agents), by the file's own network and env."""
    import jax
    import jax.numpy as jnp
    from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario

    env = HeuristicEnemySMAX(scenario=map_name_to_scenario(config["MAP_NAME"]),
                             **config["ENV_KWARGS"])
    actions = env.action_space(env.agents[0]).n
    mappo = hasattr(module, "ActorRNN")  # MAPPO's actor alone; IPPO's actor-critic
    network = (module.ActorRNN if mappo else module.ActorCriticRNN)(actions, config=config)
    agents, allies = env.agents, env.num_allies

    def episode(key, deterministic):
        k_reset, key = jax.random.split(key)
        obs, state = env.reset(k_reset)
        hidden = module.ScannedRNN.initialize_carry(len(agents), config["GRU_HIDDEN_DIM"])

        def step(carry, key):
            obs, state, hidden, total, running, won = carry
            k_act, k_env = jax.random.split(key)
            batch = jnp.stack([obs[a] for a in agents])[None]  # [1, M, obs]: one time step
            avail = env.get_avail_actions(state)
            avail = jnp.stack([avail[a] for a in agents])[None]
            # no reset within the first episode: the state starts at zeros, as the file's does
            starts = jnp.zeros((1, len(agents)), bool)
            hidden, pi = network.apply(params, hidden, (batch, starts, avail))[:2]
            action = jnp.where(deterministic, pi.mode(), pi.sample(seed=k_act))[0]
            # step_env: no auto-reset, so the ended battle's units can be read
            obs, state, reward, dones, _ = env.step_env(
                k_env, state, {a: action[i] for i, a in enumerate(agents)})
            total = total + running * jnp.stack([reward[a] for a in agents])
            over = running & dones["__all__"]
            alive = state.state.unit_alive
            won = won | (over & alive[:allies].any() & ~alive[allies:].any())
            running = running & ~dones["__all__"]
            return (obs, state, hidden, total, running, won), None

        limit = int(env.max_steps) + 1
        init = (obs, state, hidden, jnp.zeros(len(agents)), jnp.bool_(True), jnp.bool_(False))
        (_, _, _, total, _, won), _ = jax.lax.scan(step, init, jax.random.split(key, limit))
        return total.mean(), won.astype(jnp.float32)

    keys = jax.random.split(key, episodes)
    run = jax.jit(jax.vmap(episode, in_axes=(0, None)), static_argnums=1)
    (sampled, won_sampled), (deterministic, won_deterministic) = run(keys, False), run(keys, True)
    return (float(sampled.mean()), float(deterministic.mean()), float(won_sampled.mean()),
            float(won_deterministic.mean()))


def evaluate_q(module, config, env, variables, key, episodes):
    """PQN-VDN's greedy policy: each agent's first-episode return, mean over `episodes` fresh
    envs and the agents, through the file's CTRolloutManager and QNetwork (pqn_vdn_rnn.py's:
    each agent's GRU state from zeros, stepped as the file's own rollout steps it)."""
    import jax
    import jax.numpy as jnp

    test_env = module.CTRolloutManager(env, batch_size=episodes, preprocess_obs=True)
    network = module.QNetwork(action_dim=test_env.max_action_space,
                              hidden_size=config["HIDDEN_SIZE"], num_layers=config["NUM_LAYERS"],
                              norm_type=config["NORM_TYPE"],
                              norm_input=config.get("NORM_INPUT", False),
                              dueling=config.get("DUELING", False))
    agents = env.agents
    recurrent = hasattr(module, "ScannedRNN")

    def step(carry, key):
        obs, state, hidden, last_done, total, running = carry
        batch = jnp.stack([obs[a] for a in agents])  # [M, episodes, obs]
        if recurrent:  # [M, 1 time step, episodes, ...], its rollout's call
            hidden, q = jax.vmap(network.apply, in_axes=(None, 0, 0, 0, None))(
                variables, hidden, batch[:, None], last_done[:, None], False)
            q = q[:, 0]
        else:
            q = jax.vmap(network.apply, in_axes=(None, 0))(variables, batch)
        valid = test_env.get_valid_actions(state.env_state)
        valid = jnp.stack([valid[a] for a in agents])
        action = jnp.argmax(q - (1 - valid) * 1e10, axis=-1)
        obs, state, reward, dones, _ = test_env.batch_step(
            key, state, {a: action[i] for i, a in enumerate(agents)})
        reward = jnp.stack([reward[a] for a in agents], -1)  # [episodes, M]
        total = total + running[:, None] * reward
        running = running & ~dones["__all__"]
        last_done = jnp.stack([dones[a] for a in agents])
        return (obs, state, hidden, last_done, total, running), None

    k_reset, key = jax.random.split(key)
    obs, state = test_env.batch_reset(k_reset)
    limit = int(getattr(env, "max_steps", 1000)) + 1
    hidden = (module.ScannedRNN.initialize_carry(config["HIDDEN_SIZE"], len(agents), episodes)
              if recurrent else None)
    init = (obs, state, hidden, jnp.zeros((len(agents), episodes), bool),
            jnp.zeros((episodes, len(agents))), jnp.ones(episodes, bool))
    (*_, total, _), _ = jax.jit(lambda init, keys: jax.lax.scan(step, init, keys))(
        init, jax.random.split(key, limit))
    score = float(total.mean())
    return score, score


def main():
    args = parse_args()
    import jax
    import wandb
    from omegaconf import OmegaConf

    base = os.path.join(JAXMARL_DIR, "baselines")
    module = load(os.path.join(base, args.script))
    config = OmegaConf.to_container(OmegaConf.load(os.path.join(base, args.config)))
    q_learning = args.script.startswith("QLearning/")
    if q_learning:  # its Hydra entry point: config.yaml, the alg YAML merged over it
        main_yaml = os.path.join(base, "QLearning", "config", "config.yaml")
        config = {**OmegaConf.to_container(OmegaConf.load(main_yaml)), **config,
                  "TEST_DURING_TRAINING": False}
    config.update(TOTAL_TIMESTEPS=args.total_timesteps, NUM_SEEDS=args.num_seeds,
                  WANDB_MODE="disabled")
    if args.layout:
        config["ENV_KWARGS"]["layout"] = args.layout
    if args.map:
        config["MAP_NAME"] = args.map
    recurrent = "MAP_NAME" in config  # the SMAX files: a GRU actor
    if args.shaping_horizon is not None:
        config["REW_SHAPING_HORIZON"] = args.shaping_horizon
    layout = (config.get("ENV_KWARGS") or {}).get("layout")
    if config["ENV_NAME"] == "overcooked":  # its main passes the layout's object to make_train
        config["ENV_KWARGS"] = env_kwargs(config)
    wandb.init(mode="disabled")  # as its main does: its per-update callback logs to wandb
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.num_seeds)
    if q_learning:
        import copy
        env, _ = module.env_from_config(copy.deepcopy(config))
        make = lambda: module.make_train(config, env)  # noqa: E731
    else:
        make = lambda: module.make_train(config)  # noqa: E731
    if recurrent or args.script.endswith("_rnn.py"):  # seeds one after another, compiled once
        train = jax.jit(make())
        runs = [jax.block_until_ready(train(key)) for key in keys]
        out = jax.tree.map(lambda *seeds: jax.numpy.stack(seeds), *runs)
    elif q_learning:
        out = jax.jit(jax.vmap(make()))(keys)
    else:
        out = jax.vmap(jax.jit(make()))(keys)
    jax.block_until_ready(out)
    trained = time.perf_counter()
    state = out["runner_state"][0]
    one = lambda tree, s: jax.tree.map(lambda x: x[s], tree)  # noqa: E731
    wins = None
    if recurrent:  # (runner_state, update_steps): IPPO's train state, MAPPO's (actor, critic)
        train_state = state[0][0] if hasattr(module, "ActorRNN") else state[0]
        scores = [evaluate_rnn(module, config, one(train_state.params, s),
                               jax.random.PRNGKey(1000 + s), args.eval_episodes)
                  for s in range(args.num_seeds)]
        wins = [(ws, wd) for _, _, ws, wd in scores]
        scores = [(rs, rd) for rs, rd, _, _ in scores]
    elif q_learning:
        scores = [evaluate_q(module, config, env, one({"params": state.params,
                                                         "batch_stats": state.batch_stats}, s),
                             jax.random.PRNGKey(1000 + s), args.eval_episodes)
                  for s in range(args.num_seeds)]
    else:
        scores = [evaluate(module, config, one(state.params, s), jax.random.PRNGKey(1000 + s),
                           args.eval_episodes)
                  for s in range(args.num_seeds)]
    wall = time.perf_counter() - START
    # its own training metric; PQN-VDN's scan returns none (it logs through wandb only)
    # (the SMAX files return no metrics: they log through wandb only)
    metrics = out.get("metrics")
    own = metrics["returned_episode_returns"] if metrics is not None else None
    record = {
        "peer": "FLAIROx/JaxMARL",
        "peer_commit": os.environ.get("JAXMARL_COMMIT"),
        "script": args.script, "config": args.config, "env": config["ENV_NAME"],
        "layout": layout, "rew_shaping_horizon": config.get("REW_SHAPING_HORIZON"),
        "map": config.get("MAP_NAME"),
        "total_timesteps": int(args.total_timesteps), "num_seeds": args.num_seeds,
        "devices": [str(d) for d in jax.devices()], "jax": jax.__version__,
        "wall_s": wall, "wall_training_s": trained - START,
        "sampled_return_per_seed": [s for s, _ in scores],
        "deterministic_return_per_seed": [d for _, d in scores],
        # SMAX: the fraction of the first battles won, (sampled, deterministic) per seed
        "win_rate_sampled_per_seed": None if wins is None else [w for w, _ in wins],
        "win_rate_deterministic_per_seed": None if wins is None else [w for _, w in wins],
        # its own metric: per update, the mean over steps and agents of the last finished episode
        "own_last_update_return_per_seed": None if own is None else own.reshape(
            args.num_seeds, own.shape[1], -1)[:, -1].mean(-1).tolist(),
        "estimator": "each agent's first-episode return over eval_episodes fresh envs, mean over "
                     "envs and agents (scanrl's evaluation)",
        "eval_episodes": args.eval_episodes,
        **sidebyside.scanrl_commit(),
    }
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps({k: record[k] for k in ("wall_s", "sampled_return_per_seed")}))


if __name__ == "__main__":
    sys.exit(main())
