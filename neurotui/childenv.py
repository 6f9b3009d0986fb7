"""The environment of neurotui's own helper processes that import numpy: the supervisor's cache
keeper and the reader's decoding helper.

numpy's OpenBLAS starts a thread per CPU when it is loaded, and they spin a while: on this
2-core machine that was half of an idle cache keeper's CPU (0.13-0.17 of its 0.22-0.25 s; 0.07
s with one thread), and a trn1.32xlarge has 128 vCPUs. Neither helper multiplies a matrix. The
training job's environment is never changed: only these children get this one.
"""

from __future__ import annotations

import os


def numpy_helper_env(**extra: str) -> dict[str, str]:
    """This process's environment, for a helper child that loads numpy but no BLAS work."""
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", **extra}
