"""What the command line's environment settings do to an env: `--hide-obs` (`HiddenObs`, a
wrapper that removes observation components) and `--env-params` / `--eval-env-params`
(`override_params`, with the checks no env's parameter may fail). common/harness/loop.py's
`environment` applies them to the env an algorithm trains on; a Python user can wrap an env
the same way and hand it to `make_train`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from scanrl.common import envs


class HiddenObs:
    """`env` with some observation components removed (indices into the flattened
    observation), for partial observability: CartPole without its velocities is
    `HiddenObs(env, (1, 3))`. Everything else (`default_params`, `action_space`, the
    state, rendering) is the wrapped env's."""

    def __init__(self, env: Any, hidden: Sequence[int], env_params: Any = None):
        size = math.prod(
            env.observation_space(env.default_params if env_params is None else env_params).shape
        )
        bad = [i for i in hidden if not 0 <= i < size]
        if bad or len(set(hidden)) >= size:
            raise ValueError(
                f"--hide-obs {' '.join(map(str, hidden))}: the observation has {size} components "
                f"(0-{size - 1}), and at least one must stay visible."
            )
        self.env, self.hidden = env, tuple(hidden)
        self.keep = tuple(i for i in range(size) if i not in set(hidden))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def _obs(self, obs: jax.Array) -> jax.Array:
        return obs.reshape(-1)[jnp.array(self.keep)]

    def reset(self, key: jax.Array, params: Any = None):
        obs, state = self.env.reset(key, params)
        return self._obs(obs), state

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None):
        obs, state, reward, terminated, truncated, info = self.env.step(key, state, action, params)
        info = {**info, "final_observation": self._obs(info["final_observation"])}
        return self._obs(obs), state, reward, terminated, truncated, info

    def observation_space(self, params: Any):
        space = self.env.observation_space(params)
        bound = lambda b: jnp.broadcast_to(jnp.asarray(b), space.shape).reshape(-1)[
            jnp.array(self.keep)
        ]  # noqa: E731
        return envs.gymnax().environments.spaces.Box(
            bound(space.low), bound(space.high), (len(self.keep),), space.dtype
        )


def override_params(
    env_params: Any, overrides: dict[str, float], flag: str = "--env-params"
) -> Any:
    """A copy of `env_params` with some fields replaced, e.g. `{"length": 0.7}` for CartPole.

    Integer fields keep their type. ValueError naming `flag` for an unknown name or a value
    that does not fit the field.
    """
    fields = {f.name: f for f in dataclasses.fields(env_params)}
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ValueError(
            f"{flag}: Unknown environment parameter(s) {', '.join(unknown)}; this environment has: "
            f"{', '.join(sorted(fields))}."
        )
    typed = {}
    for name, value in overrides.items():
        current = getattr(env_params, name)
        if isinstance(current, bool) or not isinstance(current, (int, float, jax.Array)):
            raise ValueError(
                f"{flag} {name}: this parameter is not a number and cannot be set from the command"
                " line."
            )
        if isinstance(current, int):
            if value != int(value):
                raise ValueError(f"{flag} {name} must be a whole number, got {value}.")
            value = int(value)
        check_param(name, value, flag)
        typed[name] = value
    return env_params.replace(**typed)


TIME_LIMITS = (
    "max_steps",
    "time_limit",
    "episode_length",
    "horizon",
)  # in a parameter's name: a time limit
POSITIVE = ("mass", "length", "tau", "dt")  # masses, lengths, time steps: above 0


def check_param(name: str, value: float, flag: str = "--env-params") -> None:
    """ValueError (flag, value, rule) for a value no env can take: not finite, a time limit
    below 1 step (every step would end an episode), a mass, length or time step at or below 0."""
    lower = name.lower()
    if not math.isfinite(value):
        raise ValueError(f"{flag} {name} must be a finite number, got {value}.")
    if any(t in lower for t in TIME_LIMITS):
        if value < 1:
            raise ValueError(
                f"{flag} {name} is a time limit and must be at least 1 step, got {value}."
            )
    elif any(p in lower for p in POSITIVE) and value <= 0:
        raise ValueError(f"{flag} {name} must be above 0, got {value}.")
