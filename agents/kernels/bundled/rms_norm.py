"""RMSNorm over the free axis: ``x / sqrt(mean(x^2) + eps) * weight``, one row per partition (up to 128), the weight a
(1, D) row broadcast over the partitions.

NKI 0.5 language API, the predecessor's lessons applied: module-level ``nki`` / ``nki.language`` imports, ``nl.*``
calls only (no Python operators on NKI tensors), no ``nl.divide`` (the mean is a multiply by 1/D, a Python float).
"""

import numpy as np

try:  # the lane runs this file only where the NKI package imports; planning reads it with ast, tests with numpy
    import nki
    import nki.language as nl
except ImportError:
    try:
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
    except ImportError:
        nki = nl = None

EPS = 1e-6  # the spec's torch_kwargs.eps says the same to the torch reference

jit = nki.jit if nki is not None else (lambda fn: fn)


@jit
def rms_norm(x_in, w_in):
    out = nl.ndarray(x_in.shape, dtype=x_in.dtype, buffer=nl.shared_hbm)
    x = nl.load(x_in)
    w = nl.load(w_in)
    mean_sq = nl.multiply(nl.sum(nl.square(x), axis=1, keepdims=True), 1.0 / x_in.shape[1])
    inv_rms = nl.rsqrt(nl.add(mean_sq, EPS))
    y = nl.multiply(nl.multiply(x, inv_rms), w.broadcast_to(x_in.shape))
    nl.store(out, y)
    return out


def reference(x, w):
    """RMSNorm over the last axis with EPS, in float64; ``w`` of shape (1, D) or (D,)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w
