"""Seeds sharded over devices and a seed's environments split over 2 or 4 devices (data
parallelism) give the single-device update and run."""

import textwrap

import numpy as np
import pytest

from conftest import assert_shards_match_one_device, four_device_snippet

ENVS = ("CartPole-v1", "Pendulum-v1")

FIXED_BATCH = textwrap.dedent(
    """
    import json, sys
    from functools import partial
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from scanrl.algos import ppo
    from scanrl.common import envs, suites
    env_id = sys.argv[1]
    config = ppo.default_config(env_id, num_envs=8, num_steps=16, num_minibatches=4, num_epochs=2,
                                normalize_advantages=True, learning_rate=1e-3)
    env, env_params = suites.make(env_id)
    vec_env = envs.VecEnv(env, env_params, config.num_envs)
    obs_dim = vec_env.obs_shape[0]
    k = jax.random.split(jax.random.key(42), 8)
    params = ppo.init_params(k[0], config, vec_env)
    B = config.batch_size
    if vec_env.discrete:
        action = jax.random.randint(k[1], (B,), 0, vec_env.num_actions)
    else:
        action = jax.random.normal(k[1], (B,) + vec_env.action_shape)
    batch = ppo.Batch(
        obs=jax.random.normal(k[2], (B, obs_dim)),
        action=action,
        log_prob=jax.random.normal(k[3], (B,)) * 0.1 - 1.0,
        value=jax.random.normal(k[4], (B,)),
        advantage=jax.random.normal(k[5], (B,)) * 2.0 + 0.5,
        target=jax.random.normal(k[6], (B,)),
    )
    optimizer = ppo.make_optimizer(config.max_grad_norm, config.adam_eps)
    results = {}
    for shards in (1, 2, 4):
        def one_update(batch, key):
            minibatch = jax.tree.map(lambda x: x[: config.minibatch_size], batch)
            grads, _ = ppo.minibatch_gradient(params, minibatch, config)
            new_params, _, stats = ppo.learn(
                params, optimizer.init(params), batch, key, partial(ppo.minibatch_gradient, config=config),
                optimizer, config.learning_rate, config.num_epochs, config.num_minibatches)
            return {"grads": grads, "params": new_params, "policy_loss": stats["policy_loss"]}
        # the batch split over the devices; XLA's partitioner places the rest
        mesh = Mesh(np.array(jax.devices()[:shards]), ("data",))
        sharded = jax.device_put(batch, NamedSharding(mesh, P("data")))
        out = jax.device_get(jax.jit(one_update)(sharded, jax.random.key(0)))
        results[shards] = [x.tolist() for x in jax.tree.leaves(out)]
    print("RESULT" + json.dumps(results))
    """
)

SHORT_RUN = textwrap.dedent(
    """
    import json, sys
    import jax
    from scanrl.algos import ppo
    from scanrl.common.harness import devices, loop
    from scanrl.common.harness.runconfig import compose
    env_id = sys.argv[1]
    # one device; seeds over 4 devices; 2 seed shards x 2 data devices; one seed shard x 4 data devices
    layouts = {"1": (1, 1), "seeds": (4, 1), "2": (4, 2), "4": (4, 4)}
    results = {}
    for name, (num_devices, shards) in layouts.items():
        config = compose(ppo, env_id, num_seeds=8, num_envs=8, num_steps=32, total_timesteps=8 * 32 * 3,
                         num_minibatches=4, num_epochs=2, eval_every=3, eval_episodes=4, log_every=0,
                         num_devices=num_devices, data_parallel=shards)
        program = loop.build(ppo.make_algorithm, config)
        layout = program.layout
        results[name] = {"layout": [layout.seed_shards, layout.data_parallel, layout.seeds_per_shard]}
        out = jax.device_get(program.train(devices.seed_keys(0, 8)))
        results[name].update({k: v.tolist() for k, v in out["metrics"].items()})
        results[name]["first_param"] = jax.tree.leaves(out["policy"]["params"])[0].tolist()
        if "log_std" in out["policy"]["params"]:
            results[name]["log_std"] = out["policy"]["params"]["log_std"].tolist()
    print("RESULT" + json.dumps(results))
    """
)


FIXED_BATCH_ON_4 = four_device_snippet("test_data_parallel: fixed batch", FIXED_BATCH, *[(env,) for env in ENVS])
SHORT_RUN_ON_4 = four_device_snippet("test_data_parallel: short run", SHORT_RUN, *[(env,) for env in ENVS])


@pytest.mark.slow
def test_gradient_and_update_on_a_fixed_batch_match_one_device(four_devices):
    """4 minibatches x 2 epochs with advantage normalisation, CartPole and Pendulum: the
    minibatch gradient and the parameters after the whole update are the single-device
    ones for 2 and 4 shards."""
    for env, results in zip(ENVS, four_devices(FIXED_BATCH_ON_4)):
        one = [np.array(x) for x in results["1"]]
        assert any(np.abs(x).max() > 1e-4 for x in one)  # a real gradient and a real update
        for shards in ("2", "4"):
            for a, b in zip([np.array(x) for x in results[shards]], one):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7, err_msg=f"{env}, {shards} shards")


@pytest.mark.slow
def test_short_runs_on_every_layout_match_one_device(four_devices):
    """8 seeds, three updates with rollouts, GAE, observation/reward normalisation (Pendulum)
    and evaluation, on CartPole and Pendulum: seeds sharded over 4 devices (2 each), 2 seed
    shards x 2 data devices, and one seed's environments over 4 devices all give the one-device
    result, seed by seed.

    Pendulum's policy has a log-std parameter created from a constant: under shard_map with
    check_vma on, its gradient would be summed over devices and seeds would mix."""
    keys = ("policy_loss", "value_loss", "entropy", "approx_kl", "episode_return", "eval_return", "first_param")
    for env, results in zip(ENVS, four_devices(SHORT_RUN_ON_4)):
        assert [results[name]["layout"] for name in ("1", "seeds", "2", "4")] == [[1, 1, 8], [4, 1, 2], [2, 2, 4], [1, 4, 8]]
        for k in keys:  # seeds alone on other devices: the same per-seed program
            np.testing.assert_allclose(np.array(results["seeds"][k], float), np.array(results["1"][k], float),
                                       rtol=1e-5, atol=1e-6, err_msg=f"{env}: {k}, seeds over 4 devices")
        assert_shards_match_one_device(results, keys)
        if env == "Pendulum-v1":
            for name in ("seeds", "2", "4"):
                np.testing.assert_allclose(results[name]["log_std"], results["1"]["log_std"], rtol=1e-5, atol=1e-7)
            log_std = np.array(results["seeds"]["log_std"])
            assert not np.allclose(log_std[0], log_std[1])  # seeds kept apart
