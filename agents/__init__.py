"""On-box agents: the lane runner and the lanes. Runs on a Neuron box, a GPU box or locally on the CPU."""
