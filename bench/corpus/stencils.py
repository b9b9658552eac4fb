"""Stencils (NPBench's polybench and weather stencils): shifted-slice
arithmetic written back in place, time loops, line sweeps and recursive
filters."""
import numpy as np

from bench.corpus import kernel


def jacobi_1d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_2d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def heat_3d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        for src, dst in ((A, B), (B, A)):
            c = src[1:-1, 1:-1, 1:-1]
            dst[1:-1, 1:-1, 1:-1] = (
                0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * c + src[:-2, 1:-1, 1:-1])
                + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * c + src[1:-1, :-2, 1:-1])
                + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * c + src[1:-1, 1:-1, :-2])
                + c)


def fdtd_2d(TMAX, ex, ey, hz, _fict_):
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def seidel_2d(TSTEPS, N, A):
    for t in range(TSTEPS - 1):
        for i in range(1, N - 1):
            # the row above is already new, the row below still old
            A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:]
                           + A[i + 1, :-2] + A[i + 1, 1:-1] + A[i + 1, 2:])
            for j in range(1, N - 1):
                A[i, j] = (A[i, j] + A[i, j - 1]) / 9.0


def adi(TSTEPS, N, u):
    v = np.empty_like(u)
    p = np.empty_like(u)
    q = np.empty_like(u)
    dx = 1.0 / N
    dy = 1.0 / N
    dt = 1.0 / TSTEPS
    mul1 = 2.0 * dt / (dx * dx)
    mul2 = 1.0 * dt / (dy * dy)
    a = -mul1 / 2.0
    b = 1.0 + mul2
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    inner = slice(1, N - 1)
    for t in range(TSTEPS):
        # column sweep: tridiagonal solves along the rows of u, into v
        v[0, inner] = 1.0
        p[inner, 0] = 0.0
        q[inner, 0] = v[0, inner]
        for j in range(1, N - 1):
            den = a * p[inner, j - 1] + b
            p[inner, j] = -c / den
            q[inner, j] = (-d * u[j, :N - 2] + (1.0 + 2.0 * d) * u[j, inner] - f * u[j, 2:]
                           - a * q[inner, j - 1]) / den
        v[N - 1, inner] = 1.0
        for j in range(N - 2, 0, -1):
            v[j, inner] = p[inner, j] * v[j + 1, inner] + q[inner, j]
        # row sweep: along the columns of v, back into u
        u[inner, 0] = 1.0
        p[inner, 0] = 0.0
        q[inner, 0] = u[inner, 0]
        for j in range(1, N - 1):
            den = d * p[inner, j - 1] + e
            p[inner, j] = -f / den
            q[inner, j] = (-a * v[:N - 2, j] + (1.0 + 2.0 * a) * v[inner, j] - c * v[2:, j]
                           - d * q[inner, j - 1]) / den
        u[inner, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            u[inner, j] = p[inner, j] * u[inner, j + 1] + q[inner, j]
    return u


def deriche(alpha, imgIn):
    # recursive Gaussian edge filter: causal + anticausal passes along rows, then columns
    ea = np.exp(-alpha)
    k = (1.0 - ea) * (1.0 - ea) / (1.0 + alpha * ea - np.exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * ea * (alpha - 1.0)
    a3 = a7 = k * ea * (alpha + 1.0)
    a4 = a8 = -k * np.exp(-2.0 * alpha)
    b1 = 2.0 ** (-alpha)
    b2 = -np.exp(-2.0 * alpha)
    W, H = imgIn.shape
    y1 = np.empty_like(imgIn)
    y1[:, 0] = a1 * imgIn[:, 0]
    y1[:, 1] = a1 * imgIn[:, 1] + a2 * imgIn[:, 0] + b1 * y1[:, 0]
    for j in range(2, H):
        y1[:, j] = a1 * imgIn[:, j] + a2 * imgIn[:, j - 1] + b1 * y1[:, j - 1] + b2 * y1[:, j - 2]
    y2 = np.empty_like(imgIn)
    y2[:, -1] = 0.0
    y2[:, -2] = a3 * imgIn[:, -1]
    for j in range(H - 3, -1, -1):
        y2[:, j] = a3 * imgIn[:, j + 1] + a4 * imgIn[:, j + 2] + b1 * y2[:, j + 1] + b2 * y2[:, j + 2]
    out = y1 + y2
    y1[0, :] = a5 * out[0, :]
    y1[1, :] = a5 * out[1, :] + a6 * out[0, :] + b1 * y1[0, :]
    for i in range(2, W):
        y1[i, :] = a5 * out[i, :] + a6 * out[i - 1, :] + b1 * y1[i - 1, :] + b2 * y1[i - 2, :]
    y2[-1, :] = 0.0
    y2[-2, :] = a7 * out[-1, :]
    for i in range(W - 3, -1, -1):
        y2[i, :] = a7 * out[i + 1, :] + a8 * out[i + 2, :] + b1 * y2[i + 1, :] + b2 * y2[i + 2, :]
    out[:] = y1 + y2
    return out


def hdiff(in_field, out_field, coeff):
    # horizontal diffusion (COSMO): laplacian, limited fluxes, update
    I, J, K = out_field.shape
    lap = 4.0 * in_field[1:I + 3, 1:J + 3, :] - (
        in_field[2:I + 4, 1:J + 3, :] + in_field[0:I + 2, 1:J + 3, :]
        + in_field[1:I + 3, 2:J + 4, :] + in_field[1:I + 3, 0:J + 2, :])
    dx = lap[1:, 1:J + 1, :] - lap[:-1, 1:J + 1, :]
    flx = np.where(dx * (in_field[2:I + 3, 2:J + 2, :] - in_field[1:I + 2, 2:J + 2, :]) > 0, 0, dx)
    dy = lap[1:I + 1, 1:, :] - lap[1:I + 1, :-1, :]
    fly = np.where(dy * (in_field[2:I + 2, 2:J + 3, :] - in_field[2:I + 2, 1:J + 2, :]) > 0, 0, dy)
    out_field[:, :, :] = in_field[2:I + 2, 2:J + 2, :] - coeff * (
        flx[1:, :, :] - flx[:-1, :, :] + fly[:, 1:, :] - fly[:, :-1, :])


BET_M = 0.5
BET_P = 0.5


def vadv(utens_stage, u_stage, wcon, u_pos, utens, dtr_stage):
    # vertical advection (COSMO): a tridiagonal (Thomas) solve along k per column
    I, J, K = utens_stage.shape
    ccol = np.empty((I, J, K), dtype=utens_stage.dtype)
    dcol = np.empty((I, J, K), dtype=utens_stage.dtype)
    data_col = np.empty((I, J), dtype=utens_stage.dtype)
    for k in range(K):
        rhs = dtr_stage * u_pos[:, :, k] + utens[:, :, k] + utens_stage[:, :, k]
        bcol = dtr_stage
        if k > 0:
            gav = -0.25 * (wcon[1:, :, k] + wcon[:-1, :, k])
            acol = gav * BET_P
            bcol = bcol - acol
            rhs = rhs - gav * BET_M * (u_stage[:, :, k - 1] - u_stage[:, :, k])
        if k < K - 1:
            gcv = 0.25 * (wcon[1:, :, k + 1] + wcon[:-1, :, k + 1])
            ccol[:, :, k] = gcv * BET_P
            bcol = bcol - ccol[:, :, k]
            rhs = rhs - gcv * BET_M * (u_stage[:, :, k + 1] - u_stage[:, :, k])
        if k == 0:
            divided = 1.0 / bcol
            dcol[:, :, k] = rhs * divided
        else:
            divided = 1.0 / (bcol - ccol[:, :, k - 1] * acol)
            dcol[:, :, k] = (rhs - dcol[:, :, k - 1] * acol) * divided
        if k < K - 1:
            ccol[:, :, k] = ccol[:, :, k] * divided
    for k in range(K - 1, -1, -1):
        if k == K - 1:
            data_col[:] = dcol[:, :, k]
        else:
            data_col[:] = dcol[:, :, k] - ccol[:, :, k] * data_col
        utens_stage[:, :, k] = dtr_stage * (data_col - u_pos[:, :, k])


# ------------------------------------------------------------------ inputs

def _init_jacobi_1d(rng, TSTEPS, N):
    k = np.arange(N, dtype=np.float64)
    return TSTEPS, (k + 2) / N, (k + 3) / N


def _init_jacobi_2d(rng, TSTEPS, N):
    i, j = np.indices((N, N), dtype=np.float64)
    return TSTEPS, i * (j + 2) / N, i * (j + 3) / N


def _init_heat_3d(rng, TSTEPS, N):
    i, j, k = np.indices((N, N, N), dtype=np.float64)
    A = (i + j + (N - k)) * 10 / N
    return TSTEPS, A, A.copy()


def _init_fdtd_2d(rng, TMAX, NX, NY):
    i, j = np.indices((NX, NY), dtype=np.float64)
    return TMAX, (i * (j + 1)) / NX, (i * (j + 2)) / NY, (i * (j + 3)) / NX, np.arange(TMAX, dtype=np.float64)


def _init_seidel_2d(rng, TSTEPS, N):
    i, j = np.indices((N, N), dtype=np.float64)
    return TSTEPS, N, (i * (j + 2) + 2) / N


def _init_adi(rng, TSTEPS, N):
    i, j = np.indices((N, N), dtype=np.float64)
    return TSTEPS, N, (i + N - j) / N


def _init_deriche(rng, W, H):
    i, j = np.indices((W, H), dtype=np.float64)
    return np.float64(0.25), ((313 * i + 991 * j) % 65536) / 65535.0


def _init_hdiff(rng, I, J, K):
    return rng.random((I + 4, J + 4, K)), rng.random((I, J, K)), rng.random((I, J, K))


def _init_vadv(rng, I, J, K):
    utens_stage = rng.random((I, J, K))
    u_stage = rng.random((I, J, K))
    wcon = rng.random((I + 1, J, K))
    u_pos = rng.random((I, J, K))
    utens = rng.random((I, J, K))
    return utens_stage, u_stage, wcon, u_pos, utens, 3.0 / 20.0


F = "stencil"
KERNELS = [
    kernel("jacobi_1d", jacobi_1d, _init_jacobi_1d, {"T": dict(TSTEPS=3, N=8), "S": dict(TSTEPS=800, N=3200),
                                                     "M": dict(TSTEPS=3000, N=12000)}, mutates=(1, 2), family=F),
    kernel("jacobi_2d", jacobi_2d, _init_jacobi_2d, {"T": dict(TSTEPS=3, N=6), "S": dict(TSTEPS=50, N=150),
                                                     "M": dict(TSTEPS=80, N=350)}, mutates=(1, 2), family=F),
    kernel("heat_3d", heat_3d, _init_heat_3d, {"T": dict(TSTEPS=3, N=5), "S": dict(TSTEPS=25, N=25),
                                               "M": dict(TSTEPS=50, N=40)}, mutates=(1, 2), family=F),
    kernel("fdtd_2d", fdtd_2d, _init_fdtd_2d, {"T": dict(TMAX=3, NX=5, NY=6), "S": dict(TMAX=20, NX=200, NY=220),
                                               "M": dict(TMAX=60, NX=400, NY=450)}, mutates=(1, 2, 3), family=F),
    kernel("seidel_2d", seidel_2d, _init_seidel_2d, {"T": dict(TSTEPS=3, N=5), "S": dict(TSTEPS=8, N=50),
                                                     "M": dict(TSTEPS=15, N=100)}, mutates=(2,), family=F),
    kernel("adi", adi, _init_adi, {"T": dict(TSTEPS=2, N=5), "S": dict(TSTEPS=5, N=100),
                                   "M": dict(TSTEPS=20, N=200)}, mutates=(2,), family=F),
    kernel("deriche", deriche, _init_deriche, {"T": dict(W=5, H=4), "S": dict(W=400, H=200),
                                               "M": dict(W=1500, H=1000)}, family=F),
    kernel("hdiff", hdiff, _init_hdiff, {"T": dict(I=3, J=4, K=2), "S": dict(I=64, J=64, K=60),
                                         "M": dict(I=128, J=128, K=160)}, mutates=(1,), family=F),
    kernel("vadv", vadv, _init_vadv, {"T": dict(I=3, J=4, K=4), "S": dict(I=60, J=60, K=40),
                                      "M": dict(I=112, J=112, K=80)}, mutates=(0,), family=F),
]
