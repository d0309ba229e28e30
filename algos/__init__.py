"""scanrl algorithms: one self-contained file each (ppo, impala, grpo, sac)."""
