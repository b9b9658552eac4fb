"""Dense linear algebra in the polybench style (NPBench's polybench kernels):
BLAS-like products, rank updates, triangular solves, factorizations and
statistics, written with slices, `@`, in-place updates and Python loops."""
import numpy as np

from bench.corpus import kernel


# ------------------------------------------------------------ products

def gemm(alpha, beta, C, A, B):
    C *= beta
    C += alpha * A @ B


def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    A += np.outer(u1, v1) + u2[:, None] * v2[None, :]
    x += beta * (y @ A) + z
    w += alpha * (A @ x)


def gesummv(alpha, beta, A, B, x):
    return alpha * (A @ x) + beta * (B @ x)


def atax(A, x):
    t = A @ x
    return A.T @ t


def bicg(A, p, r):
    s = r @ A
    q = A @ p
    return s, q


def mvt(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += A.T @ y_2


def k2mm(alpha, beta, A, B, C, D):
    tmp = alpha * (A @ B)
    D *= beta
    D += tmp @ C


def k3mm(A, B, C, D):
    E = A @ B
    F = C @ D
    return E @ F


def doitgen(NR, NQ, NP, A, C4):
    # every (r, q) row of A times C4, as one product of the rows
    A[...] = (A.reshape(NR * NQ, NP) @ C4).reshape(NR, NQ, NP)


def syrk(alpha, beta, C, A):
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        C[i, :i + 1] += alpha * (A[:i + 1, :] @ A[i, :])


def syr2k(alpha, beta, C, A, B):
    n = A.shape[0]
    for i in range(n):
        C[i, :i + 1] *= beta
        C[i, :i + 1] += alpha * (A[:i + 1] @ B[i]) + alpha * (B[:i + 1] @ A[i])


def symm(alpha, beta, C, A, B):
    # A is symmetric, only its lower triangle is read
    m = C.shape[0]
    C *= beta
    for i in range(m):
        a = A[i, :i]
        C[:i, :] += alpha * np.outer(a, B[i, :])
        t = a @ B[:i, :]
        C[i, :] += alpha * A[i, i] * B[i, :] + alpha * t


def trmm(alpha, A, B):
    # B := alpha * L^T B, L the unit lower triangle of A
    m = B.shape[0]
    for i in range(m):
        B[i, :] += A[i + 1:, i] @ B[i + 1:, :]
    B *= alpha


# ---------------------------------------------------- solvers, factorizations

def trisolv(L, x, b):
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def cholesky(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[j, :j]
            A[i, j] /= A[j, j]
        A[i, i] = np.sqrt(A[i, i] - A[i, :i] @ A[i, :i])


def cholesky2(A):
    L = np.linalg.cholesky(A)
    A[:] = L + np.triu(A, k=1)


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] = (A[i, j] - A[i, :j] @ A[:j, j]) / A[j, j]
        A[i, i:] -= A[i, :i] @ A[:i, i:]


def ludcmp(A, b):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] = (A[i, j] - A[i, :j] @ A[:j, j]) / A[j, j]
        A[i, i:] -= A[i, :i] @ A[:i, i:]
    y = np.zeros_like(b)
    for i in range(n):
        y[i] = b[i] - A[i, :i] @ y[:i]
    x = np.zeros_like(b)
    for i in range(n - 1, -1, -1):
        x[i] = (y[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
    return x, y


def durbin(r):
    # Levinson-Durbin recursion for the Toeplitz system of r
    n = r.shape[0]
    y = np.empty_like(r)
    y[0] = -r[0]
    alpha = -r[0]
    beta = 1.0
    for k in range(1, n):
        beta = beta * (1.0 - alpha * alpha)
        alpha = -(r[k] + np.flip(r[:k]) @ y[:k]) / beta
        y[:k] += alpha * y[k - 1::-1]
        y[k] = alpha
    return y


def gramschmidt(A):
    m, n = A.shape
    Q = np.zeros_like(A)
    R = np.zeros((n, n), dtype=A.dtype)
    for k in range(n):
        R[k, k] = np.sqrt(A[:, k] @ A[:, k])
        Q[:, k] = A[:, k] / R[k, k]
        R[k, k + 1:] = Q[:, k] @ A[:, k + 1:]
        A[:, k + 1:] -= np.outer(Q[:, k], R[k, k + 1:])
    return Q, R


# ------------------------------------------------------------ statistics

def correlation(M, float_n, data):
    mean = data.mean(axis=0)
    stddev = np.std(data, axis=0)
    stddev[stddev <= 0.1] = 1.0
    data -= mean
    data /= np.sqrt(float_n) * stddev
    corr = np.eye(M, dtype=data.dtype)
    for i in range(M - 1):
        c = data[:, i] @ data[:, i + 1:]
        corr[i, i + 1:] = c
        corr[i + 1:, i] = c
    return corr


def covariance(M, float_n, data):
    data -= np.mean(data, axis=0)
    cov = np.zeros((M, M), dtype=data.dtype)
    for i in range(M):
        c = (data[:, i] @ data[:, i:]) / (float_n - 1.0)
        cov[i, i:] = c
        cov[i:, i] = c
    return cov


def covariance2(M, float_n, data):
    return np.cov(data.T)


# ------------------------------------------------------------------ inputs

def _ij(n, m):
    i, j = np.indices((n, m), dtype=np.float64)
    return i, j


def _init_gemm(rng, NI, NJ, NK):
    i, j = _ij(NI, NJ)
    C = ((i * j + 1) % NI) / NI
    i, k = _ij(NI, NK)
    A = (i * (k + 1) % NK) / NK
    k, j = _ij(NK, NJ)
    B = (k * (j + 2) % NJ) / NJ
    return np.float64(1.5), np.float64(1.2), C, A, B


def _init_gemver(rng, N):
    fn = np.float64(N)
    i, j = _ij(N, N)
    A = (i * j % N) / N
    k = np.arange(N, dtype=np.float64)
    u1 = k.copy()
    u2 = ((k + 1) / fn) / 2.0
    v1 = ((k + 1) / fn) / 4.0
    v2 = ((k + 1) / fn) / 6.0
    w = np.zeros(N)
    x = np.zeros(N)
    y = ((k + 1) / fn) / 8.0
    z = ((k + 1) / fn) / 9.0
    return np.float64(1.5), np.float64(1.2), A, u1, v1, u2, v2, w, x, y, z


def _init_gesummv(rng, N):
    i, j = _ij(N, N)
    A = ((i * j + 1) % N) / N
    B = ((i * j + 2) % N) / N
    x = (np.arange(N, dtype=np.float64) % N) / N
    return np.float64(1.5), np.float64(1.2), A, B, x


def _init_atax(rng, M, N):
    x = 1 + np.arange(N, dtype=np.float64) / N
    i, j = _ij(M, N)
    A = ((i + j) % N) / (5 * M)
    return A, x


def _init_bicg(rng, M, N):
    i, j = _ij(N, M)
    A = (i * (j + 1) % N) / N
    p = (np.arange(M, dtype=np.float64) % M) / M
    r = (np.arange(N, dtype=np.float64) % N) / N
    return A, p, r


def _init_mvt(rng, N):
    k = np.arange(N, dtype=np.float64)
    i, j = _ij(N, N)
    return (k % N) / N, ((k + 1) % N) / N, ((k + 3) % N) / N, ((k + 4) % N) / N, (i * j % N) / N


def _init_k2mm(rng, NI, NJ, NK, NL):
    i, j = _ij(NI, NK)
    A = ((i * j + 1) % NI) / NI
    i, j = _ij(NK, NJ)
    B = (i * (j + 1) % NJ) / NJ
    i, j = _ij(NJ, NL)
    C = ((i * (j + 3) + 1) % NL) / NL
    i, j = _ij(NI, NL)
    D = (i * (j + 2) % NK) / NK
    return np.float64(1.5), np.float64(1.2), A, B, C, D


def _init_k3mm(rng, NI, NJ, NK, NL, NM):
    i, j = _ij(NI, NK)
    A = ((i * j + 1) % NI) / (5 * NI)
    i, j = _ij(NK, NJ)
    B = ((i * (j + 1) + 2) % NJ) / (5 * NJ)
    i, j = _ij(NJ, NM)
    C = (i * (j + 3) % NL) / (5 * NL)
    i, j = _ij(NM, NL)
    D = ((i * (j + 2) + 2) % NK) / (5 * NK)
    return A, B, C, D


def _init_doitgen(rng, NR, NQ, NP):
    i, j, k = np.indices((NR, NQ, NP), dtype=np.float64)
    A = ((i * j + k) % NP) / NP
    i, j = _ij(NP, NP)
    C4 = (i * j % NP) / NP
    return NR, NQ, NP, A, C4


def _init_syrk(rng, M, N):
    i, j = _ij(N, N)
    C = ((i * j + 2) % N) / M
    i, j = _ij(N, M)
    A = ((i * j + 1) % N) / N
    return np.float64(1.5), np.float64(1.2), C, A


def _init_syr2k(rng, M, N):
    i, j = _ij(N, N)
    C = ((i * j + 3) % N) / M
    i, j = _ij(N, M)
    A = ((i * j + 1) % N) / N
    B = ((i * j + 2) % M) / M
    return np.float64(1.5), np.float64(1.2), C, A, B


def _init_symm(rng, M, N):
    i, j = _ij(M, N)
    C = ((i + j) % 100) / M
    B = ((N + i - j) % 100) / M
    i, j = _ij(M, M)
    A = np.where(j <= i, ((i + j) % 100) / M, -999.0)   # the upper triangle is never read
    return np.float64(1.5), np.float64(1.2), C, A, B


def _init_trmm(rng, M, N):
    i, j = _ij(M, M)
    A = ((i * j) % M) / M
    np.fill_diagonal(A, 1.0)
    i, j = _ij(M, N)
    B = ((N + i - j) % N) / N
    return np.float64(1.5), A, B


def _init_trisolv(rng, N):
    i, j = _ij(N, N)
    L = (i + N - j + 1) * 2 / N
    return L, np.full(N, -999.0), np.arange(N, dtype=np.float64)


def _spd(N):
    """L @ L.T for a unit lower triangle L: symmetric positive definite."""
    i, j = _ij(N, N)
    L = np.where(j <= i, (-j % N) / N + 1, 0.0)
    np.fill_diagonal(L, 1.0)
    return L @ L.T


def _init_spd(rng, N):
    return (_spd(N),)


def _init_ludcmp(rng, N):
    b = (np.arange(N, dtype=np.float64) + 1) / np.float64(N) / 2.0 + 4.0
    return _spd(N), b


def _init_durbin(rng, N):
    return (N + 1 - np.arange(N, dtype=np.float64),)


def _init_gramschmidt(rng, M, N):
    A = rng.random((M, N))
    while np.linalg.matrix_rank(A) < N:
        A = rng.random((M, N))
    return (A,)


def _init_correlation(rng, M, N):
    i, j = _ij(N, M)
    return M, np.float64(N), (i * j) / M + i


def _init_covariance(rng, M, N):
    i, j = _ij(N, M)
    return M, np.float64(N), (i * j) / M


F = "linalg"
KERNELS = [
    kernel("gemm", gemm, _init_gemm, {"T": dict(NI=5, NJ=6, NK=7), "S": dict(NI=1000, NJ=1100, NK=1200),
                                      "M": dict(NI=2500, NJ=2750, NK=3000)}, mutates=(2,), family=F),
    kernel("gemver", gemver, _init_gemver, {"T": dict(N=6), "S": dict(N=1000), "M": dict(N=3000)},
           mutates=(2, 7, 8), family=F),
    kernel("gesummv", gesummv, _init_gesummv, {"T": dict(N=6), "S": dict(N=2000), "M": dict(N=4000)}, family=F),
    kernel("atax", atax, _init_atax, {"T": dict(M=5, N=7), "S": dict(M=4000, N=5000),
                                      "M": dict(M=10000, N=12500)}, family=F),
    kernel("bicg", bicg, _init_bicg, {"T": dict(M=5, N=7), "S": dict(M=4000, N=5000),
                                      "M": dict(M=10000, N=12500)}, family=F),
    kernel("mvt", mvt, _init_mvt, {"T": dict(N=6), "S": dict(N=5500), "M": dict(N=11000)},
           mutates=(0, 1), family=F),
    kernel("k2mm", k2mm, _init_k2mm, {"T": dict(NI=4, NJ=5, NK=6, NL=7),
                                      "S": dict(NI=800, NJ=850, NK=900, NL=950),
                                      "M": dict(NI=2000, NJ=2250, NK=2500, NL=2750)}, mutates=(5,), family=F),
    kernel("k3mm", k3mm, _init_k3mm, {"T": dict(NI=4, NJ=5, NK=6, NL=7, NM=8),
                                      "S": dict(NI=800, NJ=850, NK=900, NL=950, NM=1000),
                                      "M": dict(NI=2000, NJ=2200, NK=2400, NL=2600, NM=2800)}, family=F),
    kernel("doitgen", doitgen, _init_doitgen, {"T": dict(NR=3, NQ=4, NP=5), "S": dict(NR=60, NQ=60, NP=128),
                                               "M": dict(NR=110, NQ=125, NP=256)}, mutates=(3,), family=F),
    kernel("syrk", syrk, _init_syrk, {"T": dict(M=4, N=5), "S": dict(M=50, N=70), "M": dict(M=150, N=200)},
           mutates=(2,), family=F),
    kernel("syr2k", syr2k, _init_syr2k, {"T": dict(M=4, N=5), "S": dict(M=35, N=50), "M": dict(M=110, N=140)},
           mutates=(2,), family=F),
    kernel("symm", symm, _init_symm, {"T": dict(M=4, N=5), "S": dict(M=40, N=50), "M": dict(M=120, N=150)},
           mutates=(2,), family=F),
    kernel("trmm", trmm, _init_trmm, {"T": dict(M=4, N=5), "S": dict(M=65, N=80), "M": dict(M=200, N=250)},
           mutates=(2,), family=F),
    kernel("trisolv", trisolv, _init_trisolv, {"T": dict(N=5), "S": dict(N=2000), "M": dict(N=5000)},
           mutates=(1,), family=F),
    kernel("cholesky", cholesky, _init_spd, {"T": dict(N=5), "S": dict(N=100), "M": dict(N=300)},
           mutates=(0,), family=F),
    kernel("cholesky2", cholesky2, _init_spd, {"T": dict(N=5), "S": dict(N=1000), "M": dict(N=2200)},
           mutates=(0,), family=F),
    kernel("lu", lu, _init_spd, {"T": dict(N=5), "S": dict(N=60), "M": dict(N=220)}, mutates=(0,), family=F),
    kernel("ludcmp", ludcmp, _init_ludcmp, {"T": dict(N=5), "S": dict(N=60), "M": dict(N=220)},
           mutates=(0,), family=F),
    # (the Levinson recursion amplifies rounding: at N=6000 numpy's own y is 1.4e-8 of max|y| from the
    # long double one, shapejit's, summing its dot products in another order, 7.6e-8)
    kernel("durbin", durbin, _init_durbin, {"T": dict(N=6), "S": dict(N=1000), "M": dict(N=6000)},
           family=F, rtol={"M": 1e-6}),
    kernel("gramschmidt", gramschmidt, _init_gramschmidt, {"T": dict(M=6, N=4), "S": dict(M=70, N=60),
                                                           "M": dict(M=220, N=180)}, mutates=(0,), family=F),
    kernel("correlation", correlation, _init_correlation, {"T": dict(M=4, N=6), "S": dict(M=500, N=600),
                                                           "M": dict(M=1400, N=1800)}, mutates=(2,), family=F),
    kernel("covariance", covariance, _init_covariance, {"T": dict(M=4, N=6), "S": dict(M=500, N=600),
                                                        "M": dict(M=1400, N=1800)}, mutates=(2,), family=F),
    kernel("covariance2", covariance2, _init_covariance, {"T": dict(M=4, N=6), "S": dict(M=500, N=600),
                                                          "M": dict(M=1400, N=1800)}, family=F),
]
