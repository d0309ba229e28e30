"""Frames of an episode, drawn with Pillow, and a GIF of them.

Why not gymnax's Visualizer (research/lifecycle-notes.md, section 4): for classic control it
asks gymnasium to render every frame, which needs pygame (not installed with gymnax; without
it the GIF fails with a misleading IndexError) and builds a new env per frame (~0.2 s a frame,
~100 s for a 500-step CartPole episode). Drawing the same pictures directly takes about a
millisecond a frame. Pillow is already installed with matplotlib.

`can_draw(env, obs_shape)` says whether an env can be drawn: an env with its own picture
(`render_rgb(state, params) -> [H, W, 3]`: the suites' adapters, through each suite's own
renderer), the classic-control tasks by their state, and every env whose observation is an
image or grid (`[H, W]` or `[H, W, C]`: Catch, the MinAtar games, Pong-misc, a user's pixel
env) from its observation.

`frames` draws a whole episode. An env whose picture is traceable JAX (`render_rgb_jax`,
e.g. Navix) has all its pictures drawn by one jitted, vmapped call: drawing them one by one
dispatched each of the renderer's operations separately, frame after frame.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import jax
import numpy as np
from PIL import Image, ImageDraw

from scanrl.common import envs

WIDTH, HEIGHT = 360, 240
CLASSIC = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0")


def can_draw(env: Any, obs_shape: Sequence[int]) -> bool:
    return (callable(envs.hook(env, "render_rgb")) or envs.hook(env, "name") in CLASSIC
            or len(obs_shape) in (2, 3))


def frames(
    env: Any, env_params: Any, states: Any, obs: np.ndarray, titles: Sequence[str],
    track: Callable[[Iterable], Iterable] = iter,
) -> list[Image.Image]:
    """One picture per state of an episode (leaves [T, ...], obs [T, *obs]), titles[t] on the
    t-th. `track` wraps the frames' loop (scanrl-eval: rich's progress bar on a terminal)."""
    pictures = None
    if callable(envs.hook(env, "render_rgb_jax")):
        pictures = _pictures(env.render_rgb_jax, env_params, states, len(titles))
    return [frame(env, env_params, jax.tree.map(lambda x: x[t], states), obs[t], title,
                  None if pictures is None else pictures[t])
            for t, title in track(enumerate(titles))]


def _pictures(
    draw_one: Any, env_params: Any, states: Any, count: int, chunk: int = 128
) -> np.ndarray:
    """[count, H, W, 3] uint8 of `draw_one(state, params)`, traced once and vmapped over `chunk`
    states at a time (the last chunk padded by repeating), so a long episode needs no more
    memory."""
    size = min(chunk, count)
    draw = jax.jit(jax.vmap(draw_one, in_axes=(0, None)))
    out = []
    for start in range(0, count, size):
        index = np.minimum(np.arange(start, start + size), count - 1)
        out.append(np.asarray(draw(jax.tree.map(lambda x: x[index], states), env_params)))
    return np.concatenate(out)[:count].astype(np.uint8)


def frame(env: Any, env_params: Any, state: Any, obs: np.ndarray, title: str,
          picture: np.ndarray | None = None) -> Image.Image:
    """One RGB picture of a single (unbatched) env state, `title` written on top; `picture`
    [H, W, 3]: the env's own picture of it when already drawn (`frames`)."""
    name = envs.hook(env, "name")
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    if picture is not None or callable(envs.hook(env, "render_rgb")):
        picture = env.render_rgb(state, env_params) if picture is None else picture
        _paste(image, draw, Image.fromarray(np.asarray(picture, np.uint8)))
    elif name == "CartPole-v1":
        _cartpole(draw, env_params, state)
    elif name == "Pendulum-v1":
        _pendulum(draw, state)
    elif name == "Acrobot-v1":
        _acrobot(draw, state)
    elif name in ("MountainCar-v0", "MountainCarContinuous-v0"):
        _mountain_car(draw, env_params, state)
    else:
        _paste(image, draw, _grid(np.asarray(obs)))
    draw.text((6, 4), title, fill="black")
    return image


def _paste(image: Image.Image, draw: ImageDraw.ImageDraw, picture: Image.Image) -> None:
    """`picture` centred below the title line, shrunk to fit (or enlarged by whole pixels),
    framed."""
    if picture.width > WIDTH or picture.height > HEIGHT - 20:
        picture.thumbnail((WIDTH, HEIGHT - 20))
    scale = min(WIDTH // picture.width, (HEIGHT - 20) // picture.height)
    if scale > 1:
        picture = picture.resize((picture.width * scale, picture.height * scale), Image.NEAREST)
    x, y = (WIDTH - picture.width) // 2, 20 + (HEIGHT - 20 - picture.height) // 2
    image.paste(picture, (x, y))
    draw.rectangle([x - 1, y - 1, x + picture.width, y + picture.height], outline=(150, 150, 150))


def write_gif(path: str | Path, frames: list[Image.Image], milliseconds: int = 50) -> None:
    """One GIF frame per picture (each differs: the title holds the step number)."""
    # Each frame gets its own 255-colour palette by the fast octree: Pillow's default (median cut)
    # took longer than drawing the frames (~13 ms a frame).
    frames = [
        f.quantize(255, method=Image.Quantize.FASTOCTREE) if f.mode == "RGB" else f for f in frames
    ]
    # written beside it and then renamed: a GIF cut short by Ctrl-C is never left at `path`
    part = Path(f"{path}.part")
    frames[0].save(part, format="GIF", save_all=True, append_images=frames[1:],
                   duration=milliseconds, loop=0)
    os.replace(part, path)


def _f(x) -> float:
    return float(np.asarray(x))


def _cartpole(draw: ImageDraw.ImageDraw, params: Any, state: Any) -> None:
    limit = _f(params.x_threshold) * 1.2
    scale, ground = WIDTH / (2 * limit), HEIGHT * 0.7
    cx = WIDTH / 2 + _f(state.x) * scale
    draw.line([(0, ground), (WIDTH, ground)], fill="black")
    draw.rectangle([cx - 25, ground - 15, cx + 25, ground + 15], fill=(60, 60, 60))
    pole = 2 * _f(params.length) * scale  # the pole's full length (gymnax's `length` is half of it)
    theta = _f(state.theta)
    draw.line(
        [(cx, ground - 15), (cx + pole * math.sin(theta), ground - 15 - pole * math.cos(theta))],
        fill=(200, 140, 80), width=8,
    )


def _pendulum(draw: ImageDraw.ImageDraw, state: Any) -> None:
    cx, cy, r = WIDTH / 2, HEIGHT / 2 + 10, HEIGHT * 0.35
    theta = _f(state.theta)  # 0 = upright
    draw.line(
        [(cx, cy), (cx + r * math.sin(theta), cy - r * math.cos(theta))], fill=(200, 70, 70),
        width=10,
    )
    draw.ellipse([cx - 5, cy - 5, cx + 5, cy + 5], fill="black")


def _acrobot(draw: ImageDraw.ImageDraw, state: Any) -> None:
    cx, cy, r = WIDTH / 2, HEIGHT / 2 + 10, HEIGHT * 0.2
    a1, a2 = _f(state.joint_angle1), _f(state.joint_angle1) + _f(
        state.joint_angle2
    )  # 0 = hanging down
    p1 = (cx + r * math.sin(a1), cy + r * math.cos(a1))
    p2 = (p1[0] + r * math.sin(a2), p1[1] + r * math.cos(a2))
    draw.line([(0, cy - r), (WIDTH, cy - r)], fill=(180, 180, 180))  # the height to swing above
    draw.line([(cx, cy), p1], fill=(60, 110, 200), width=8)
    draw.line([p1, p2], fill=(60, 110, 200), width=8)


def _mountain_car(draw: ImageDraw.ImageDraw, params: Any, state: Any) -> None:
    low, high = _f(params.min_position), _f(params.max_position)

    def at(x):  # gymnax's hill: height sin(3x)
        return ((x - low) / (high - low) * WIDTH, HEIGHT * (0.55 - 0.35 * math.sin(3 * x)))

    xs = np.linspace(low, high, 100)
    draw.line([at(x) for x in xs], fill="black", width=2)
    gx, gy = at(_f(params.goal_position))
    draw.line([(gx, gy), (gx, gy - 30)], fill="black", width=2)
    draw.polygon([(gx, gy - 30), (gx + 15, gy - 25), (gx, gy - 20)], fill=(230, 190, 40))
    x, y = at(_f(state.position))
    draw.ellipse([x - 9, y - 18, x + 9, y], fill=(200, 70, 70))


def _grid(obs: np.ndarray) -> Image.Image:
    """An image observation [H, W] or [H, W, C]: each channel its own colour, scaled to fit."""
    obs = obs.astype(np.float32)
    if obs.ndim == 2:
        obs = obs[..., None]
    h, w, c = obs.shape
    if c == 3 and obs.max() > 1.0:  # already RGB in 0..255
        rgb = obs
    else:
        palette = np.array(
            [
                [230, 60, 60], [60, 160, 60], [60, 90, 220], [230, 170, 30], [160, 60, 200],
                [40, 180, 190], [120, 120, 120], [240, 120, 180], [150, 100, 40], [0, 0, 0],
            ],
            np.float32,
        )
        colours = palette[np.arange(c) % len(palette)]
        weight = np.clip(obs, 0.0, 1.0)
        rgb = 255.0 * (1.0 - weight.max(axis=-1, keepdims=True)) + np.einsum(
            "hwc,cd->hwd", weight, colours
        ) / np.maximum(weight.sum(axis=-1, keepdims=True), 1.0)
    image = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    scale = max(1, min(WIDTH // w, (HEIGHT - 20) // h))
    return image.resize((w * scale, h * scale), Image.NEAREST)
