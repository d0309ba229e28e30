"""XLA's own memory count (`memory_analysis`: arguments + outputs - aliased + temporaries) for one
update chunk of `ppo_rnn.py --core CORE` at the Transformer-XL PPO's Craftax config (1,024 envs x
128 steps, embedding 256, 8 heads, 2 layers, memory window 128, gradient window 64; one seed),
compiled for the CPU, never run: what one seed's update needs before any GPU is lent. The
pre-compile memory check is switched off here, so a program larger than this machine's memory
is still counted.

    python benchmarks/trxl_memory.py trxl
"""

import sys
import time

from scanrl.algos import ppo_rnn
from scanrl.common.harness import memory, run
from scanrl.common.harness.runconfig import compose

memory.check_memory = lambda *args, **kwargs: None  # counted here, not refused
core = sys.argv[1] if len(sys.argv) > 1 else "trxl"
config = compose(ppo_rnn, "craftax/Craftax-Symbolic-v1", recipe="none", core=core,
                 num_envs=1024, num_steps=128, seq_len=64, trxl_window=128, gru_size=256,
                 trxl_heads=8, trxl_layers=2, encoder_hidden=(256,), head_hidden=(256, 256),
                 num_minibatches=8, num_epochs=4, num_seeds=1, total_timesteps=1024 * 128 * 4,
                 eval_every=0, compile_cache=False)
started = time.time()
m = run.prepare(config, ppo_rnn.make_algorithm).advance.compile().memory_analysis()
gib = lambda count: f"{count / 2**30:.2f} GiB"  # noqa: E731
total = m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes
print(f"{core}: compiled in {time.time() - started:.0f} s; arguments {gib(m.argument_size_in_bytes)}, "
      f"outputs {gib(m.output_size_in_bytes)}, aliased {gib(m.alias_size_in_bytes)}, temporaries "
      f"{gib(m.temp_size_in_bytes)}; total {gib(total)}")
