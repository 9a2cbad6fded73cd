"""Where things live on a box, as every package names them (the harness installs there, lanes default to them)."""
from __future__ import annotations

# The one Neuron compile cache, on the box's EBS volume (NEURON_COMPILE_CACHE_URL when nothing else is given).
NEURON_COMPILE_CACHE = "/opt/neuronpipe/neuron-compile-cache"
