"""The learning test's MemoryChain-20 configuration (GRU 32, seeds 0-9) with and without
--last-action: each seed's mean training return over the last 5 updates (RESULTS.md section 10)."""
import jax
import numpy as np

from scanrl.algos import pqn_rnn
from scanrl.common import suites
from scanrl.common.harness import devices
env, env_params = suites.make("MemoryChain-bsuite")
for la in (False, True):
    config = pqn_rnn.default_config("MemoryChain-bsuite", gru_size=32, hidden=(32,), last_action=la)
    train = pqn_rnn.make_train(config, env, env_params.replace(memory_length=20))
    r = np.asarray(jax.device_get(train(devices.seed_keys(0, 10)))["metrics"]["episode_return"])
    print("last_action", la, np.round(r[:, -5:].mean(1), 3), flush=True)
