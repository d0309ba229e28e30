"""The conv torso: its shapes, its math against a plain loop, and when each algorithm uses it. The
tanh-squashed normal's pieces (--action-dist tanh_normal) against distrax, float64 and quadrature,
and the helpers that tests/test_impala.py, test_grpo.py and test_ppo_rnn.py share for it."""

import functools
import math
import re
import types

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import grpo, impala, ppo, ppo_rnn
from scanrl.common import envs, suites
from scanrl.common.nets import (SQUASH, Actions, actions_for, cnn_apply, cnn_init, entropy_of,
                                pre_tanh_normal, to_bounds, use_cnn)

from conftest import REPO


@pytest.mark.parametrize("image_shape,channels,features", [
    ((10, 10, 6), (16,), 8 * 8 * 16),
    ((10, 10, 4), (16, 32), 6 * 6 * 32),
    ((7, 5, 3), (8,), 5 * 3 * 8),
])
@pytest.mark.slow
def test_conv_shapes(image_shape, channels, features):
    params, out_dim = cnn_init(jax.random.key(0), image_shape, channels)
    assert out_dim == features
    c_in = image_shape[-1]
    for layer, c_out in zip(params, channels):
        assert layer["w"].shape == (3, 3, c_in, c_out) and layer["b"].shape == (c_out,)
        c_in = c_out
    for batch in [(), (5,), (2, 3)]:
        x = jnp.ones(batch + image_shape)
        assert cnn_apply(params, x).shape == batch + (features,)


def test_conv_equals_a_plain_loop():
    """out[i, j, o] = act(sum_{di, dj, c} x[i + di, j + dj, c] w[di, dj, c, o] + b[o]), 'valid', stride 1."""
    params, _ = cnn_init(jax.random.key(1), (6, 5, 3), (4,))
    params[0]["b"] = jnp.arange(4.0) / 10
    x = np.asarray(jax.random.normal(jax.random.key(2), (6, 5, 3)))
    w, b = np.asarray(params[0]["w"]), np.asarray(params[0]["b"])
    expected = np.zeros((4, 3, 4))
    for i in range(4):
        for j in range(3):
            for o in range(4):
                expected[i, j, o] = np.tanh((x[i:i + 3, j:j + 3, :] * w[:, :, :, o]).sum() + b[o])
    out = cnn_apply(params, jnp.asarray(x), "tanh")
    np.testing.assert_allclose(out, expected.reshape(-1), rtol=1e-5, atol=1e-6)


def test_conv_init_is_orthogonal_with_gain_sqrt2():
    params, _ = cnn_init(jax.random.key(3), (10, 10, 6), (16,))
    w = np.asarray(params[0]["w"]).reshape(-1, 16)  # [54, 16]: orthonormal columns times sqrt 2
    np.testing.assert_allclose(w.T @ w, 2.0 * np.eye(16), atol=1e-4)


def test_too_many_convolutions_for_the_image_is_one_sentence():
    with pytest.raises(ValueError, match=r"--conv-channels \(8, 8, 8, 8, 8\): 5 3x3 convolutions do not fit a 10x10 image"):
        cnn_init(jax.random.key(0), (10, 10, 4), (8,) * 5)


def test_torso_choice():
    assert use_cnn("auto", (10, 10, 4)) and use_cnn("cnn", (10, 10, 4))
    assert not use_cnn("auto", (4,)) and not use_cnn("mlp", (10, 10, 4)) and not use_cnn("mlp", (4,))
    with pytest.raises(ValueError, match=r"--torso cnn needs image observations \[H, W, C\].*\[4\]"):
        use_cnn("cnn", (4,))


@pytest.mark.parametrize("algo", [ppo, impala, grpo, ppo_rnn])
@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-02)
def test_each_algorithm_reads_images_with_the_conv_torso_and_vectors_with_the_mlp(algo):
    """--torso auto: a MinAtar frame [10, 10, C] goes through the convolutions (the first MLP layer
    takes their features); CartPole's vector goes straight into the MLP, as before; --torso mlp
    flattens the frame."""
    def params_for(env_id, **overrides):
        config = algo.default_config(env_id, **overrides)
        env, env_params = suites.make(env_id)
        return algo.init_params(jax.random.key(0), config, envs.VecEnv(env, env_params, config.num_envs))

    first = "encoder" if algo is ppo_rnn else "actor"
    image = params_for("Breakout-MinAtar")
    assert image["torso"][0]["w"].shape == (3, 3, 4, 16)
    assert image[first][0]["w"].shape[0] == 8 * 8 * 16
    flat = params_for("Breakout-MinAtar", torso="mlp")
    assert "torso" not in flat and flat[first][0]["w"].shape[0] == 10 * 10 * 4
    vector = params_for("CartPole-v1")
    assert "torso" not in vector and vector[first][0]["w"].shape[0] == 4


# --- the tanh-squashed normal (common/nets.py) -------------------------------------------------
def gaussian_log_prob(u, loc, scale):
    """log N(u; loc, diag scale^2) [...] in float64; u, loc, scale [..., A]."""
    return (-0.5 * ((u - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)).sum(-1)


def check_squashed_log_prob(dist, out, min_std, u):
    """`dist` (an algorithm's tanh_normal policy, whose actor gave `out` [..., 2A]) at pre-tanh actions
    u [..., A]: its loc and scale are out's halves (softplus + min_std), log pi(u) is the normal's, and
    log pi(u) - log|det J(u)| is the log-density of the squashed action tanh(u) by hand in float64
    (log(1 - tanh(u)^2) = -2 log cosh(u)) and by distrax's Transformed(normal, Block(Tanh)), which
    inverts tanh with atanh: |u| up to about 4 keeps tanh(u) far enough from +-1 for that."""
    out, u64 = np.asarray(out, np.float64), np.asarray(u, np.float64)
    loc, raw = np.split(out, 2, axis=-1)
    scale = np.log1p(np.exp(raw)) + min_std
    np.testing.assert_allclose(dist.loc, loc, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dist.scale_diag, scale, rtol=1e-6)
    u = jnp.asarray(u, jnp.float32)
    log_prob_u = dist.log_prob(u)
    np.testing.assert_allclose(log_prob_u, gaussian_log_prob(u64, loc, scale), rtol=1e-5, atol=1e-5)
    squashed = log_prob_u - SQUASH.forward_log_det_jacobian(u)
    by_hand = gaussian_log_prob(u64, loc, scale) + (2 * np.log(np.cosh(u64))).sum(-1)
    np.testing.assert_allclose(squashed, by_hand, rtol=1e-5, atol=1e-4)
    reference = distrax.Transformed(distrax.MultivariateNormalDiag(jnp.asarray(loc, jnp.float32),
                                                                   jnp.asarray(scale, jnp.float32)),
                                    distrax.Block(distrax.Tanh(), 1))
    np.testing.assert_allclose(squashed, reference.log_prob(jnp.tanh(u)), rtol=1e-4, atol=1e-3)


def entropy_by_quadrature(loc, scale):
    """H(tanh(u)) = H(u) + E[sum log(1 - tanh(u)^2)], u ~ N(loc, diag scale^2) (loc, scale [A]),
    by quadrature in float64, with log(1 - tanh(u)^2) = -2 (|u| + log1p(exp(-2|u|)) - log 2)."""
    total = 0.0
    for m, s in zip(np.asarray(loc, np.float64), np.asarray(scale, np.float64)):
        grid = np.linspace(m - 12 * s, m + 12 * s, 200_001)
        density = np.exp(-0.5 * ((grid - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
        log_det = -2 * (np.abs(grid) + np.log1p(np.exp(-2 * np.abs(grid))) - math.log(2))
        total += 0.5 * math.log(2 * math.pi * math.e) + math.log(s) + np.sum(density * log_det) * (grid[1] - grid[0])
    return total


def constant_actor(params, loc, raw_scale):
    """params with the actor's output layer zeroed but for its bias [loc, raw scale]: the policy is
    the same whatever the observation (or GRU state)."""
    bias = jnp.concatenate([jnp.asarray(loc, jnp.float32), jnp.asarray(raw_scale, jnp.float32)])
    last = {"w": jnp.zeros_like(params["actor"][-1]["w"]), "b": bias}
    return {**params, "actor": [*params["actor"][:-1], last]}


def check_entropy_stat(entropy, loc, raw_scale, noise, min_std=0.001):
    """A loss's entropy stat over the noise [n, A] of a constant policy (loc, raw scale [A]): the mean
    of nets.entropy_of with noise, which meets the quadrature within 5 standard errors (a false failure
    at odds of about 1 in 10^6) and lies below the unsquashed normal's entropy."""
    dist = pre_tanh_normal(jnp.broadcast_to(jnp.concatenate([jnp.asarray(loc), jnp.asarray(raw_scale)]),
                                            (noise.shape[0], 2 * len(loc))), min_std)
    samples = np.asarray(entropy_of(dist, noise), np.float64)
    np.testing.assert_allclose(float(entropy), samples.mean(), rtol=1e-5, atol=1e-5)
    expected = entropy_by_quadrature(loc, np.log1p(np.exp(np.asarray(raw_scale, np.float64))) + min_std)
    tolerance = 5 * samples.std() / math.sqrt(len(samples))
    assert abs(float(entropy) - expected) < tolerance, (float(entropy), expected, tolerance)
    assert float(entropy) < float(dist.entropy()[0]) - 0.2  # the tanh's Jacobian term lowers it


def test_pre_tanh_normal_and_the_squashed_log_prob():
    """[loc, raw scale] -> N(loc, softplus(raw) + min_std), batch [...] and event [A]; log pi(tanh(u))
    against distrax's Transformed and float64; the smallest std is min_std."""
    out = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5, 6)) * [1, 1, 1, 2, 2, 2], jnp.float32)
    dist = pre_tanh_normal(out, 0.01)
    assert dist.batch_shape == (4, 5) and dist.event_shape == (3,)
    u = jnp.clip(dist.loc + 1.5 * dist.scale_diag * jax.random.normal(jax.random.key(1), (4, 5, 3)), -4.0, 4.0)
    check_squashed_log_prob(dist, out, 0.01, u)
    np.testing.assert_allclose(pre_tanh_normal(jnp.full((1, 4), -100.0), 0.001).scale_diag, 0.001, rtol=1e-6)


def test_to_bounds_maps_tanh_onto_the_bounds():
    low, high = jnp.array([-1.0, 0.0]), jnp.array([3.0, 0.5])
    u = jnp.array([[-1e30, -1e30], [-20.0, 20.0], [0.0, 0.0], [0.5, -0.5], [1e30, 1e30], [-jnp.inf, jnp.inf]])
    a = to_bounds(u, low, high)
    assert ((a >= low) & (a <= high)).all()
    np.testing.assert_array_equal(a[0], low)
    np.testing.assert_array_equal(a[4], high)
    np.testing.assert_allclose(a[2], (low + high) / 2)
    np.testing.assert_allclose(a[3], low + (high - low) * (np.tanh([0.5, -0.5]) + 1) / 2, rtol=1e-6)


def test_squashed_entropy_meets_its_expectation():
    """The one-sample estimate averaged over 200,000 samples, two dimensions (one off-centre): the
    quadrature's H(u) + E[sum log(1 - tanh(u)^2)], below H(u); about H(u) for a tiny std at 0."""
    noise = jax.random.normal(jax.random.key(0), (200_000, 2))
    loc, raw = [0.0, 1.0], [0.0, -1.0]
    dist = pre_tanh_normal(jnp.broadcast_to(jnp.array(loc + raw), (200_000, 4)), 0.001)
    check_entropy_stat(entropy_of(dist, noise).mean(), loc, raw, noise)
    tiny = entropy_of(pre_tanh_normal(jnp.tile(jnp.array([0.0, -100.0]), (100, 1)), 0.001), noise[:100, :1])
    np.testing.assert_allclose(tiny, 0.5 * math.log(2 * math.pi * math.e) + math.log(0.001), atol=1e-3)


def test_tanh_normal_bounds_are_checked_before_compiling():
    """Discrete actions or infinite bounds: one sentence naming --action-dist tanh_normal and the env."""
    _, low, high = actions_for("tanh_normal", envs.VecEnv(*suites.make("Pendulum-v1"), 2), "Pendulum-v1")
    np.testing.assert_array_equal(low, [-2.0])
    np.testing.assert_array_equal(high, [2.0])
    with pytest.raises(ValueError, match=r"^--action-dist tanh_normal needs continuous \(Box\) actions and --env "
                                         r"CartPole-v1 has discrete ones; leave --action-dist at gaussian\.$"):
        actions_for("tanh_normal", envs.VecEnv(*suites.make("CartPole-v1"), 2), "CartPole-v1")
    unbounded = types.SimpleNamespace(discrete=False, action_low=jnp.array([-jnp.inf, 0.0]),
                                      action_high=jnp.array([jnp.inf, 1.0]))
    with pytest.raises(ValueError, match=r"^--action-dist tanh_normal needs finite action bounds and --env Open's are "
                                         r"\[\[-inf, 0.0\], \[inf, 1.0\]\]; use --action-dist gaussian\.$"):
        actions_for("tanh_normal", unbounded, "Open")


def test_actions_are_chosen_once_from_the_action_dist():
    """nets.Actions, what every on-policy file does with its policy's actions: gaussian and
    discrete ones pass to the env as sampled, with two keys per step, no noise and the exact
    entropy; tanh_normal's stored u goes to the env as to_bounds(u), with a third key for the
    entropy's noise and the one-sample squashed estimate. The key splits are the ones the files
    made inline, so their programs are unchanged."""
    pendulum = envs.VecEnv(*suites.make("Pendulum-v1"), 2)
    key, u = jax.random.key(3), jnp.array([[-30.0], [0.0], [0.7]])
    dist = pre_tanh_normal(jnp.array([[0.2, -0.5], [1.0, 0.3]]), 0.001)

    plain = actions_for("gaussian", pendulum, "Pendulum-v1")
    assert plain == Actions() and not plain.squashed
    k_action, k_env, k_noise = plain.step_keys(key)
    np.testing.assert_array_equal(jax.random.key_data(jnp.stack([k_action, k_env])),
                                  jax.random.key_data(jax.random.split(key)))
    assert k_noise is None and plain.noise(k_noise, (2, 1)) is None
    np.testing.assert_array_equal(plain.to_env(u), u)
    np.testing.assert_array_equal(entropy_of(dist), dist.entropy())

    squashed = actions_for("tanh_normal", pendulum, "Pendulum-v1")
    assert squashed.squashed
    np.testing.assert_array_equal(jax.random.key_data(jnp.stack(squashed.step_keys(key))),
                                  jax.random.key_data(jax.random.split(key, 3)))
    noise = squashed.noise(jax.random.key(4), (2, 1))
    np.testing.assert_array_equal(noise, jax.random.normal(jax.random.key(4), (2, 1)))
    np.testing.assert_array_equal(squashed.to_env(u), to_bounds(u, jnp.array([-2.0]), jnp.array([2.0])))
    np.testing.assert_array_equal(entropy_of(dist, noise), dist.entropy() + SQUASH.forward_log_det_jacobian(
        dist.loc + dist.scale_diag * noise))
    action, log_prob = squashed.sample(dist, key)
    np.testing.assert_array_equal(log_prob, dist.log_prob(action))  # of u as stored
    np.testing.assert_array_equal(squashed.act(dist, key, True), to_bounds(dist.mode(), *squashed[1:]))
    np.testing.assert_array_equal(squashed.act(dist, key, False), to_bounds(dist.sample(seed=key), *squashed[1:]))
    with pytest.raises(ValueError, match=r"^--action-dist tanh_normal needs continuous \(Box\) actions and --env "
                                         r"CartPole-v1 has discrete ones"):
        actions_for("tanh_normal", envs.VecEnv(*suites.make("CartPole-v1"), 2), "CartPole-v1")


@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-02)
def test_what_a_network_reads_of_an_observation():
    """VecEnv.observe: flat, normalised by the statistics where given, reshaped to images, or
    cut to a split observation's policy part (its first policy_obs_dim features)."""
    breakout = envs.VecEnv(*suites.make("Breakout-MinAtar"), 2)
    obs = jax.random.uniform(jax.random.key(0), (3, 2) + breakout.obs_shape)
    stats = envs.update_stats(envs.init_stats((breakout.obs_dim,)), breakout.flat_obs(obs))
    np.testing.assert_array_equal(breakout.observe(obs), breakout.flat_obs(obs))
    np.testing.assert_array_equal(breakout.observe(obs, image=True), obs)
    normalized = envs.normalize(stats, breakout.flat_obs(obs))
    np.testing.assert_array_equal(breakout.observe(obs, stats), normalized)
    np.testing.assert_array_equal(breakout.observe(obs, stats, image=True), normalized.reshape(obs.shape))
    split = types.SimpleNamespace(flat_obs=lambda o: o, obs_shape=(5,), policy_obs_dim=2)
    x = jnp.arange(10.0).reshape(2, 5)
    np.testing.assert_array_equal(envs.VecEnv.observe(split, x, policy_part=True), x[:, :2])
    np.testing.assert_array_equal(envs.VecEnv.observe(split, x), x)


# --- a tiny env for the algorithms' tanh_normal tests (test_impala.py, test_grpo.py, test_ppo_rnn.py) ----
@functools.cache
def bounded_env():
    """A gymnax env with actions in the Box [-1, 3] x [0, 0.5] whose reward counts the action's
    components outside those bounds; observations are standard normal [3]; episodes are cut at 4
    steps. (Built on first use: gymnax's import must come after conftest chose the devices.)"""
    from flax import struct
    from gymnax.environments import environment, spaces

    @struct.dataclass
    class Params(environment.EnvParams):
        max_steps_in_episode: int = 4

    class Bounded(environment.Environment):
        default_params = Params()
        low, high = (-1.0, 0.0), (3.0, 0.5)

        def step_env(self, key, state, action, params):
            outside = ((action < jnp.array(self.low)) | (action > jnp.array(self.high))).sum().astype(jnp.float32)
            return (jax.random.normal(key, (3,)), environment.EnvState(time=state.time + 1), outside, jnp.array(False),
                    {})

        def reset_env(self, key, params):
            return jax.random.normal(key, (3,)), environment.EnvState(time=0)

        def action_space(self, params=None):
            return spaces.Box(jnp.array(self.low), jnp.array(self.high), (2,))

        def observation_space(self, params):
            return spaces.Box(-jnp.inf, jnp.inf, (3,))

    return Bounded()


@functools.cache
def tanh_normal_program(algo, **overrides):
    """(algorithm, jitted update, initial state) of `algo` with --action-dist tanh_normal on bounded_env(),
    one update of 1 epoch x 1 minibatch of 4 envs x 16 steps: its loss stats are those at the rollout's
    own parameters. VecEnv's clipping is off while the update compiles, so the env gets the actions
    exactly as the algorithm makes them. Cached: each test file's tests share one compiled update."""
    env = bounded_env()
    config = algo.default_config("Pendulum-v1", action_dist="tanh_normal", num_envs=4, num_steps=16, num_epochs=1,
                                 num_minibatches=1, total_timesteps=64, **overrides)
    algorithm = algo.make_algorithm(config, env, env.default_params)
    state = jax.jit(algorithm.init)(jax.random.key(0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(envs.VecEnv, "clip_action", lambda self, action: action)
        update = jax.jit(algorithm.update).lower(state, 0).compile()
    return algorithm, update, state


# actor biases [loc, raw scale] that throw u far outside the bounds: huge means of both signs, a huge std
EXTREME_ACTORS = (([1e4, -1e4], [-3.0, -3.0]), ([-1e4, 1e4], [1e4, 1e4]), ([0.0, 0.0], [1e4, 1e4]))


def test_the_bounded_env_counts_actions_outside_its_bounds(monkeypatch):
    """The check the algorithms' tests rely on: with VecEnv's clipping off, the env sees (and counts)
    an action outside its bounds; with it on (as in training), never."""
    env = bounded_env()
    action = jnp.array([[0.0, 0.25], [-1.5, 0.25], [3.5, 0.6]])
    for clipped, counts in ((True, [0, 0, 0]), (False, [0, 1, 2])):
        if not clipped:
            monkeypatch.setattr(envs.VecEnv, "clip_action", lambda self, action: action)
        vec_env = envs.VecEnv(env, env.default_params, 3)
        _, state = vec_env.reset(jax.random.key(0))
        np.testing.assert_array_equal(vec_env.step(jax.random.key(1), state, action)[2].reward, counts)


@pytest.mark.slow  # over 5 s in the quick tier on a 2-core CI-kind machine (2026-12-03)
def test_lecun_uniform_init_draws_every_layer_alike_and_ppo_reads_it():
    """--init lecun_uniform (Brax's networks): every layer's weights uniform within
    +-sqrt(3 / fan_in), with variance 1 / fan_in, the output layers included (no 0.01 policy
    head); zero biases. The default stays orthogonal with the 0.01 head."""
    from scanrl.common.nets import mlp_init
    layers = mlp_init(jax.random.key(0), (256, 512, 3), output_gain=0.01, scheme="lecun_uniform")
    for layer, fan_in in zip(layers, (256, 512)):
        w = np.asarray(layer["w"])
        assert np.abs(w).max() <= math.sqrt(3 / fan_in) and np.abs(w).max() > 0.9 * math.sqrt(3 / fan_in)
        assert abs(w.var() * fan_in - 1) < 0.1, w.var() * fan_in
        assert not np.asarray(layer["b"]).any()
    vec_env = envs.VecEnv(*suites.make("Pendulum-v1"), 1)
    lecun = ppo.init_params(jax.random.key(1), ppo.default_config("Pendulum-v1", init="lecun_uniform"), vec_env)
    default = ppo.init_params(jax.random.key(1), ppo.default_config("Pendulum-v1"), vec_env)
    head = lambda params: np.abs(np.asarray(params["actor"][-1]["w"])).max()  # noqa: E731
    assert head(default) < 0.02 < head(lecun)


def test_the_kit_takes_values_and_reads_no_config_field():
    """A copied file that renames a Config field must fail at its own call site: the kit's math
    modules (onpolicy, offpolicy, nets, envs, cores) take values, never a Config, so none of them
    reads a `config.` attribute (jax.config aside) or getattr(config, ...); only algorithm.py's
    value checks and the harness read Configs."""
    kit = [REPO / "common" / f"{name}.py" for name in ("onpolicy", "offpolicy", "nets", "envs", "cores")]
    reads = [f"{p.name}:{i}: {line.strip()}" for p in kit
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"(?<![\w.])config\.\w|getattr\(config\b", line)]
    assert not reads, reads
    vec_env = envs.VecEnv(*suites.make("CartPole-v1"), 2)
    with pytest.raises(TypeError, match="env_id"):  # a value missing at the call, named there
        actions_for("gaussian", vec_env)
