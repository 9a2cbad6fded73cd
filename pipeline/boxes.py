"""Where things live on a box, as every package names them (the harness installs there, lanes default to them)."""

from __future__ import annotations

# The box's cache volume (the per-boot setup mounts the retained gp3 volume there) and the one Neuron compile
# cache on it: precompile, training and serving all use it (NEURON_COMPILE_CACHE_URL, agents.box_env).
BOX_CACHE_ROOT = "/var/cache/neuronpipe"
NEURON_COMPILE_CACHE = f"{BOX_CACHE_ROOT}/neuron-compile-cache"
