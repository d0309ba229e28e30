"""Small utilities the algorithm files share: envs, nets, devices, the loop, the run driver."""
