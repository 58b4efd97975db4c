"""Dense linear algebra at steady state: the LAPACK-backed decompositions jaxlib ships, where
a change is usually jaxlib's (its LAPACK kernels or their custom-call wrappers), not XLA's.

Each class is one jnp.linalg routine on a square matrix, in float32 and float64 (precision is
the point of these routines; float64 runs with x64 on); ``time_run`` times the compiled
program, ``time_numpy`` the same routine in numpy.linalg. Decompositions that are unique only
up to signs get an O(n^2) sign convention in both programs, so the factors themselves can be
compared.
"""

import jax.numpy as jnp
import numpy as np

from jaxbench_helpers.runtime import data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# matrix side per profile; regular: float64 svd, the slowest, ~20 ms on a 2-core CPU
SIZES = {"quick": 32, "regular": 192, "large": 1024}

# right-hand sides solved at once
RHS_COLUMNS = 16


def _side(profile):
    return SIZES[profile.name]


def _positive_sums(xp, factor):
    """+1 or -1 per column of ``factor``: the sign that makes that column's sum positive."""
    return xp.where(factor.sum(axis=0) < 0, -1, 1).astype(factor.dtype)


def _qr(xp, a):
    """Q and R with R's diagonal positive (the unique QR of a full-rank matrix)."""
    q, r = xp.linalg.qr(a)
    signs = xp.where(xp.diagonal(r) < 0, -1, 1).astype(a.dtype)
    return q * signs, r * signs[:, None]


def _svd(xp, a):
    """U, S, Vt with each column of U summing to a positive number."""
    u, s, vt = xp.linalg.svd(a, full_matrices=False)
    signs = _positive_sums(xp, u)
    return u * signs, s, vt * signs[:, None]


def _eigh(xp, a):
    """Eigenvalues and eigenvectors, each eigenvector summing to a positive number."""
    w, v = xp.linalg.eigh(a)
    return w, v * _positive_sums(xp, v)


def _general(profile, dtype):
    side = _side(profile)
    return data.normal((side, side), dtype)


def _spd(profile, dtype):
    """M M^T / n + I: symmetric positive definite, condition number about 5."""
    side = _side(profile)
    m = data.normal((side, side), "float64")
    return (m @ m.T / side + np.eye(side)).astype(dtype)


def _symmetric(profile, dtype):
    m = data.normal((_side(profile),) * 2, "float64")
    return ((m + m.T) / 2).astype(dtype)


class Cholesky(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.linalg.cholesky of a symmetric positive definite matrix (LAPACK potrf)."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(a):
        return jnp.linalg.cholesky(a)

    @staticmethod
    def reference(a):
        return np.linalg.cholesky(a)

    def inputs(self, profile, dtype, dispatch):
        return (_spd(profile, dtype),)


class Solve(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.linalg.solve of a well-conditioned general system with 16 right-hand sides (LU
    factorisation, getrf, then triangular solves)."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(a, b):
        return jnp.linalg.solve(a, b)

    @staticmethod
    def reference(a, b):
        return np.linalg.solve(a, b)

    def inputs(self, profile, dtype, dispatch):
        side = _side(profile)
        shifted = data.normal((side, side), "float64") + 2 * np.sqrt(side) * np.eye(side)
        return (shifted.astype(dtype),
                data.normal((side, RHS_COLUMNS), dtype, seed=data.SEED + 1))


class Qr(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.linalg.qr of a general square matrix (Householder geqrf plus orgqr for Q)."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(a):
        return _qr(jnp, a)

    @staticmethod
    def reference(a):
        return _qr(np, a)

    def inputs(self, profile, dtype, dispatch):
        return (_general(profile, dtype),)


class Svd(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.linalg.svd of a general square matrix, singular vectors included (gesdd)."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(a):
        return _svd(jnp, a)

    @staticmethod
    def reference(a):
        return _svd(np, a)

    def inputs(self, profile, dtype, dispatch):
        return (_general(profile, dtype),)


class Eigh(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.linalg.eigh of a symmetric matrix, eigenvectors included (syevd)."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(a):
        return _eigh(jnp, a)

    @staticmethod
    def reference(a):
        return _eigh(np, a)

    def inputs(self, profile, dtype, dispatch):
        return (_symmetric(profile, dtype),)
