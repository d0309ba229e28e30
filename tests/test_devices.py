"""How seeds and environments are laid out over devices. (That every layout trains as one device
does: test_data_parallel.py.)"""

import textwrap

import pytest

from conftest import four_device_snippet

from scanrl.common.harness import devices

LAYOUTS = textwrap.dedent(
    """
    import json
    from scanrl.common.harness import devices
    cases = {
        "8 seeds": (8, 4, 0), "1 seed": (1, 4, 0), "2 seeds": (2, 4, 0), "3 seeds": (3, 4, 0),
        "64 seeds": (64, 4, 0), "1 seed, 6 envs": (1, 6, 0), "1 seed, 3 envs": (1, 3, 0),
        "8 seeds, dp 2": (8, 4, 2), "1 seed, dp 2": (1, 4, 2), "3 seeds, dp 4": (3, 4, 4),
    }
    out = {}
    for name, (seeds, num_envs, dp) in cases.items():
        layout = devices.plan_layout(seeds, {"--num-envs": num_envs}, dp)
        out[name] = [layout.seed_shards, layout.data_parallel, layout.seeds_per_shard]
    for name, (seeds, num_envs, dp) in {"dp 3": (1, 12, 3), "dp 4, 6 envs": (1, 6, 4)}.items():
        try:
            devices.plan_layout(seeds, {"--num-envs": num_envs}, dp)
        except ValueError as error:
            out[name] = str(error)
    print("RESULT" + json.dumps(out))
    """
)


LAYOUTS_ON_4 = four_device_snippet("test_devices: layouts", LAYOUTS)


@pytest.mark.slow
def test_layouts_on_four_devices(four_devices):
    """[seed shards, data-parallel, seeds per shard] chosen for 4 devices."""
    (layouts,) = four_devices(LAYOUTS_ON_4)
    assert layouts == {
        "8 seeds": [4, 1, 2],
        "1 seed": [1, 4, 1],  # automatic: one seed's 4 environments over 4 devices
        "2 seeds": [2, 2, 1],
        "3 seeds": [2, 2, 2],  # padded to 4 seeds, the extra one dropped
        "64 seeds": [4, 1, 16],
        "1 seed, 6 envs": [1, 2, 1],  # 6 environments split 2 ways, not 4: 2 devices used
        "1 seed, 3 envs": [1, 1, 1],  # nothing splits 3 environments: one device
        "8 seeds, dp 2": [2, 2, 4],
        "1 seed, dp 2": [1, 2, 1],
        "3 seeds, dp 4": [1, 4, 3],
        "dp 3": "--data-parallel 3 does not split the 4 devices into equal groups; "
        "use one of 1, 2, 4, or --num-devices with a multiple of 3.",
        "dp 4, 6 envs": "--num-envs (6) is not divisible by --data-parallel 4; every device must get an equal share.",
    }


def test_too_many_devices_is_a_clear_error():
    with pytest.raises(ValueError, match="more devices than"):
        devices.select_devices(1000)


def test_seed_keys_are_per_seed_keys():
    import jax

    keys = devices.seed_keys(5, 3)
    for i in range(3):
        assert (jax.random.key_data(keys[i]) == jax.random.key_data(jax.random.key(5 + i))).all()


def test_cpu_compile_options_stay_on_cpus():
    """The compile-time options cut LLVM work on CPUs; a GPU program keeps XLA's defaults (the
    GPU backend would read the same options for its kernels' code)."""
    from types import SimpleNamespace

    import jax

    from scanrl.common import algorithm

    assert algorithm.compiler_options() == algorithm.CPU_COMPILER_OPTIONS  # this machine's CPU devices
    assert algorithm.compiler_options(jax.devices()[:1]) == algorithm.CPU_COMPILER_OPTIONS
    assert algorithm.compiler_options([SimpleNamespace(platform="gpu")]) == {}
    assert algorithm.compiler_options([SimpleNamespace(platform="tpu")]) == {}
