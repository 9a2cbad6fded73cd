"""Model servers per backend behind one interface (see ``launcher.py``).

``get_launcher(backend, cache_root)`` returns the backend's :class:`Launcher`;
``ServerProcess(launcher, model, config, log_path)`` boots it (health-checked, always
stopped, one ``compiles`` row per boot); ``configs.catalogue(profile, backend)`` holds
the A/B server configs; ``session.serve(ctx, ...)`` wires a boot into a lane (compiles
row, Prometheus sampling, log kept).
"""

from __future__ import annotations

from pathlib import Path

from agents.serving.launcher import Launcher, ServedModel, ServerBootError, ServerProcess

BACKENDS = ("neuron", "cuda", "cpu")


class UnknownServingBackendError(KeyError):
    def __init__(self, backend: str):
        super().__init__(f"no server launcher for backend {backend!r}; valid backends: {', '.join(BACKENDS)}")

    def __str__(self) -> str:
        return self.args[0]


def get_launcher(backend: str, cache_root: Path) -> Launcher:
    if backend == "neuron":
        from agents.serving.neuron import NeuronLauncher

        return NeuronLauncher(cache_root)
    if backend == "cuda":
        from agents.serving.cuda import CudaLauncher

        return CudaLauncher(cache_root)
    if backend == "cpu":
        from agents.serving.cpu import CpuLauncher

        return CpuLauncher()
    raise UnknownServingBackendError(backend)


__all__ = [
    "BACKENDS",
    "Launcher",
    "ServedModel",
    "ServerBootError",
    "ServerProcess",
    "UnknownServingBackendError",
    "get_launcher",
]
