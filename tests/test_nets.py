"""The conv torso: its shapes, its math against a plain loop, and when each algorithm uses it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanrl.algos import grpo, impala, ppo, ppo_rnn
from scanrl.common import envs
from scanrl.common.nets import cnn_apply, cnn_init, use_cnn


@pytest.mark.parametrize("image_shape,channels,features", [
    ((10, 10, 6), (16,), 8 * 8 * 16),
    ((10, 10, 4), (16, 32), 6 * 6 * 32),
    ((7, 5, 3), (8,), 5 * 3 * 8),
])
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
def test_each_algorithm_reads_images_with_the_conv_torso_and_vectors_with_the_mlp(algo):
    """--torso auto: a MinAtar frame [10, 10, C] goes through the convolutions (the first MLP layer
    takes their features); CartPole's vector goes straight into the MLP, as before; --torso mlp
    flattens the frame."""
    def params_for(env_id, **overrides):
        config = algo.default_config(env_id, **overrides)
        env, env_params = envs.make(env_id)
        return algo.init_params(jax.random.key(0), config, envs.VecEnv(env, env_params, config.num_envs))

    first = "encoder" if algo is ppo_rnn else "actor"
    image = params_for("Breakout-MinAtar")
    assert image["torso"][0]["w"].shape == (3, 3, 4, 16)
    assert image[first][0]["w"].shape[0] == 8 * 8 * 16
    flat = params_for("Breakout-MinAtar", torso="mlp")
    assert "torso" not in flat and flat[first][0]["w"].shape[0] == 10 * 10 * 4
    vector = params_for("CartPole-v1")
    assert "torso" not in vector and vector[first][0]["w"].shape[0] == 4
