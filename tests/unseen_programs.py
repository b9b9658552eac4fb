"""Programs written as people write numpy (none taken from a test or a
benchmark of ours): k-means, cross-entropy, top-k, stencils, a search loop,
linear and logistic regression, an MLP's training step, attention with a
causal mask, im2col convolution, RMSNorm with rotary embeddings, Viterbi,
Gaussian elimination with pivoting, a sieve, the game of life, bilinear
sampling, k-nearest neighbours, FFT convolution, percentiles...
tests/test_unseen_programs.py runs each jitted against numpy."""
from collections import namedtuple

import numpy as np


def kmeans_step(X, C):
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    lab = d.argmin(1)
    newC = np.zeros_like(C)
    np.add.at(newC, lab, X)
    cnt = np.bincount(lab, minlength=C.shape[0])[:, None]
    return newC / np.maximum(cnt, 1), lab

def xent(logits, y):
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[:, 0]
    return (lse - logits[np.arange(logits.shape[0]), y]).mean()

def topk(x, k=3):
    idx = np.argsort(-x, axis=-1)[:, :k]
    return np.take_along_axis(x, idx, axis=-1), idx

def polyfeat(x):
    return np.polyval([1.0, -2.0, 0.5, 3.0], x) + np.outer(x, x).trace()

def stencil1d(u, steps=5):
    for _ in range(steps):
        u = u.copy()
        u[1:-1] = 0.25 * u[:-2] + 0.5 * u[1:-1] + 0.25 * u[2:]
    return u

def clip_norm(g, maxn=1.0):
    n = np.linalg.norm(g)
    return g * min(1.0, maxn / (n + 1e-12))

def masked_fill(x, thr):
    y = x.copy()
    y[y < thr] = 0
    y[:, ::2] *= -1
    return y.cumsum(axis=1)

def standardize(x):
    mu = x.mean(axis=0)
    sd = x.std(axis=0, ddof=1)
    return np.where(sd > 0, (x - mu) / sd, 0.0)

def hist_int(a):
    h = np.zeros(16, np.int64)
    for v in a:
        h[v % 16] += 1
    return h

def rolling_max(x, w=4):
    out = np.empty(x.shape[0] - w + 1)
    for i in range(out.shape[0]):
        out[i] = x[i:i + w].max()
    return out

def pairwise_cos(A):
    n = np.sqrt((A * A).sum(1, keepdims=True))
    B = A / n
    S = B @ B.T
    np.fill_diagonal(S, 0.0)
    return S

def einsum_attn(q, k, v):
    s = np.einsum("hqd,hkd->hqk", q, k) / np.sqrt(q.shape[-1])
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s); p /= p.sum(-1, keepdims=True)
    return np.einsum("hqk,hkd->hqd", p, v)

def int_math(a, b):
    return (a // 3) * b - (a % 5) + np.left_shift(a & 7, 2) + np.abs(b - a).max()

def sort_median(x):
    s = np.sort(x, axis=1)
    n = x.shape[1]
    return s[:, n // 2] if n % 2 else 0.5 * (s[:, n // 2 - 1] + s[:, n // 2])


def linreg_step(X, y, w, lr=0.01):
    g = X.T @ (X @ w - y) / X.shape[0]
    return w - lr * g

def logreg_loss(X, y, w):
    z = X @ w
    p = 1 / (1 + np.exp(-z))
    return -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log1p(-p + 1e-12))

def sobel(img):
    p = np.pad(img, 1, mode="edge")
    gx = p[1:-1, 2:] - p[1:-1, :-2]
    gy = p[2:, 1:-1] - p[:-2, 1:-1]
    return np.hypot(gx, gy)

def softmax0(x):
    e = np.exp(x - x.max(axis=0))
    return e / e.sum(axis=0)

def batchnorm(x, g, b, eps=1e-5):
    mu = x.mean(0)
    var = x.var(0)
    return g * (x - mu) / np.sqrt(var + eps) + b

def onehot(labels, k):
    return np.eye(k)[labels]

def gauss_kernel(X, gamma=0.5):
    sq = (X ** 2).sum(1)
    d = sq[:, None] + sq[None, :] - 2 * X @ X.T
    return np.exp(-gamma * np.maximum(d, 0))

def lstm_step(x, h, c, W, U, b):
    z = x @ W + h @ U + b
    i, f, o, g = np.split(z, 4, axis=1)
    sig = lambda t: 1 / (1 + np.exp(-t))
    c2 = sig(f) * c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(c2), c2

def first_negative(x):
    for i in range(x.shape[0]):
        if x[i] < 0:
            return i
    return -1

def inplace_mix(x):
    x = x.copy()
    x *= 2
    x[::2] += 1
    x[x > 3] = 3
    return x

def int_ops(a):
    return np.floor_divide(a, 4), np.clip(a, -3, 3), np.round(a / 3.0, 1), np.maximum.accumulate(a)

def dict_out(x):
    return {"mean": x.mean(), "max": x.max(axis=1), "pair": (x[:1], x[-1:])}

def weak_scalars(x):
    return x * 0.5 + 2 - x ** 2 / 3.0

def arange_ops(x):
    n = x.shape[0]
    return x * np.arange(n) + np.linspace(0.0, 1.0, n)

def stack_list(x):
    parts = [x[i] * (i + 1) for i in range(3)]
    return np.stack(parts), np.concatenate(parts)


def newton_sqrt(a, tol=1e-10):
    x = a.copy()
    while np.max(np.abs(x * x - a)) > tol:
        x = 0.5 * (x + a / x)
    return x

def power_iter(A, iters=30):
    v = np.ones(A.shape[0]) / np.sqrt(A.shape[0])
    for _ in range(iters):
        w = A @ v
        v = w / np.linalg.norm(w)
    return v @ A @ v

def jacobi_inplace(u, iters=5):
    for _ in range(iters):
        u[1:-1] = 0.5 * (u[:-2] + u[2:])
    return u

class Model:
    def __init__(self, d):
        self.W = np.linspace(-1, 1, d * 3).reshape(d, 3)
        self.b = np.zeros(3)
    def forward(self, x):
        return np.tanh(x @ self.W + self.b)

def drawdown(x):
    peak = np.maximum.accumulate(x)
    return (x - peak).min()

def moving_avg_conv(x, k=3):
    return np.convolve(x, np.ones(k) / k, mode="valid")

def moving_avg_cumsum(x, k=3):
    c = np.cumsum(np.insert(x, 0, 0.0))
    return (c[k:] - c[:-k]) / k

def bucketize(x, edges):
    return np.searchsorted(edges, x)

def interp(x, xp, fp):
    return np.interp(x, xp, fp)

def upper_pairs(X):
    d = ((X[:, None] - X[None]) ** 2).sum(-1)
    iu = np.triu_indices(X.shape[0], 1)
    return d[iu]

def smallest_k(x, k=2):
    idx = np.argpartition(x, k)[:k]
    return np.sort(x[idx])

def pair_sums(x):
    return x.reshape(-1, 2).sum(1)

def pos_sum(x):
    return x[x > 0].sum(), (x > 0).any(axis=0), np.all(x < 10)

def close_check(a, b):
    if np.allclose(a, b):
        return a
    return b - a


def mlp_train_step(X, y, W1, W2, lr=0.1):
    h = X @ W1
    a = np.maximum(h, 0)
    out = a @ W2
    err = out - y
    dW2 = a.T @ err / X.shape[0]
    da = err @ W2.T
    da[h <= 0] = 0
    dW1 = X.T @ da / X.shape[0]
    W1 -= lr * dW1
    W2 -= lr * dW2
    return (err ** 2).mean()

def causal_attn(q, k, v):
    T = q.shape[0]
    s = q @ k.T / np.sqrt(q.shape[1])
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    s = np.where(mask, -np.inf, s)
    s = s - s.max(1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(1, keepdims=True)) @ v

def conv2d_im2col(img, ker):
    win = np.lib.stride_tricks.sliding_window_view(img, ker.shape)
    return np.einsum("ijkl,kl->ij", win, ker)

def rmsnorm_rope(x, g):
    x = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
    T, D = x.shape
    pos = np.arange(T)[:, None]
    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    ang = pos * inv[None, :]
    c, s = np.cos(ang), np.sin(ang)
    x1, x2 = x[:, ::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, ::2] = x1 * c - x2 * s
    out[:, 1::2] = x1 * s + x2 * c
    return out

def hist_eq(img):
    h, edges = np.histogram(img, 16, range=(0.0, 1.0))
    cdf = h.cumsum() / img.size
    return np.interp(img, edges[1:], cdf)

def viterbi(logA, logB, obs):
    T = obs.shape[0]
    S = logA.shape[0]
    dp = logB[:, obs[0]].copy()
    back = np.zeros((T, S), dtype=np.int64)
    for t in range(1, T):
        cand = dp[:, None] + logA
        back[t] = cand.argmax(0)
        dp = cand.max(0) + logB[:, obs[t]]
    return dp.max(), back

def gauss_elim(A, b):
    A = A.copy(); b = b.copy()
    n = A.shape[0]
    for i in range(n):
        p = i + np.argmax(np.abs(A[i:, i]))
        A[[i, p]] = A[[p, i]]
        b[[i, p]] = b[[p, i]]
        f = A[i + 1:, i] / A[i, i]
        A[i + 1:] -= f[:, None] * A[i]
        b[i + 1:] -= f * b[i]
    return A, b

def sieve(n_arr):
    n = n_arr.shape[0]
    is_p = np.ones(n, dtype=bool)
    is_p[:2] = False
    for i in range(2, int(n ** 0.5) + 1):
        if is_p[i]:
            is_p[i * i::i] = False
    return np.nonzero(is_p)[0].size

def life(board):
    nb = sum(np.roll(np.roll(board, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
    return ((nb == 3) | (board & (nb == 2))).astype(board.dtype)

def bilinear(img, ys, xs):
    y0 = np.floor(ys).astype(int); x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, img.shape[0] - 1); x1 = np.minimum(x0 + 1, img.shape[1] - 1)
    wy = ys - y0; wx = xs - x0
    return (img[y0, x0] * (1 - wy) * (1 - wx) + img[y1, x0] * wy * (1 - wx)
            + img[y0, x1] * (1 - wy) * wx + img[y1, x1] * wy * wx)

def knn_predict(Xtr, ytr, Xte, k=3):
    d = ((Xte[:, None, :] - Xtr[None]) ** 2).sum(-1)
    nn = np.argsort(d, 1)[:, :k]
    votes = ytr[nn]
    out = np.empty(Xte.shape[0], dtype=np.int64)
    for i in range(Xte.shape[0]):
        out[i] = np.bincount(votes[i], minlength=3).argmax()
    return out


def rows_to_list(X, w):
    out = []
    for i in range(X.shape[0]):
        out.append(X[i] @ w)
    return np.array(out)

def grow(x):
    acc = np.zeros(0)
    for i in range(3):
        acc = np.concatenate([acc, x * i])
    return acc

def weighted(x, w):
    return np.average(x, weights=w, axis=0), np.mean(x, axis=1, where=x > 0)

def grads(y):
    return np.gradient(y), np.diff(y, n=2), np.cumprod(1 + y * 0.01)

def crossk(a, b):
    return np.cross(a, b), np.kron(a[:2], b[:2]), np.tile(a, (2, 1))

def rep(x, r):
    return np.repeat(x, r)

def unravel(x):
    i = np.argmax(x)
    return np.unravel_index(i, x.shape)

def fft_conv(a, b):
    n = a.shape[0] + b.shape[0] - 1
    return np.fft.irfft(np.fft.rfft(a, n) * np.fft.rfft(b, n), n)

def uniq(x):
    u, c = np.unique(x, return_counts=True)
    return u[c.argmax()]

def select_piece(x):
    return np.select([x < 0, x < 1], [-x, x ** 2], default=1.0)

def ravel_multi(i, j, n):
    return np.ravel_multi_index((i, j), (n, n))

def reshape_neg(x):
    b, t = x.shape
    return x.reshape(-1, 2).sum(-1).reshape(b, t // 2)

def lexsort2(a, b):
    return np.lexsort((a, b))

def nan_stats(x):
    y = x.copy()
    y[::3] = np.nan
    return np.nanmean(y), np.nanmax(y), np.isnan(y).sum()

def percentile(x):
    return np.percentile(x, [10, 50, 90]), np.median(x)

def outer_loop_matrix(n_arr):
    n = n_arr.shape[0]
    M = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            M[i, j] = (i + 1) / (j + 1)
    return M


Stats = namedtuple("Stats", "mean std")

def batched_mm(a, b):
    return np.einsum("...ij,...jk->...ik", a, b)

def clip_none(x):
    return np.clip(x, None, 0.5), np.clip(x, -0.5, None)

def rounding(x):
    return np.round(x, 2), np.floor(x), np.ceil(x), np.trunc(x), np.sign(x), np.mod(x, 0.7), np.fmod(x, 0.7)

def uint8_img(img):
    return (img.astype(np.int16) + 50).clip(0, 255).astype(np.uint8)

def flat_rows(x):
    return x.reshape(x.shape[0], -1).sum(1), x.ravel(order="F")[:5]

def newaxis(x, y):
    return x[:, np.newaxis] * y[np.newaxis, :] + x[..., None]

def multi_axis(x):
    return x.sum(axis=(0, 2)), (x > 0).mean(), np.diff(x, axis=0).max(axis=(1, 2))

def rev_cumsum(x):
    return np.cumsum(x[::-1])[::-1]

def sorted_desc(x):
    return np.sort(x, axis=0)[::-1]

def named(x):
    return Stats(x.mean(), x.std())

def logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(-1, keepdims=True))).squeeze(-1)

def scale_cols(x):
    x = x - x.min(0)
    rng = x.max(0)
    rng[rng == 0] = 1
    return x / rng

def running_stats(x):
    n = 0
    mean = 0.0
    m2 = 0.0
    for i in range(x.shape[0]):
        n += 1
        d = x[i] - mean
        mean += d / n
        m2 += d * (x[i] - mean)
    return mean, m2 / (n - 1)

def where_nonzero(x):
    idx = np.where(x > 0)[0]
    return idx.size, x[idx].sum()

def piecewise_loop(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        if x[i] < 0:
            out[i] = 0.0
        elif x[i] < 1:
            out[i] = x[i] ** 2
        else:
            out[i] = 2 * x[i] - 1
    return out

# batch 7 (session 21): graphs, filters, DP rows, swaps, gathers, in-place normalization
def floyd(D):
    D = D.copy()
    n = D.shape[0]
    for k in range(n):
        D = np.minimum(D, D[:, k:k + 1] + D[k:k + 1, :])
    return D

def dijkstra(W):
    n = W.shape[0]
    dist = np.full(n, np.inf)
    dist[0] = 0.0
    done = np.zeros(n, dtype=bool)
    for _ in range(n):
        d = np.where(done, np.inf, dist)
        u = np.argmin(d)
        done[u] = True
        dist = np.minimum(dist, dist[u] + W[u])
    return dist

def kalman(zs, F, H, Q, R):
    x = np.zeros(F.shape[0])
    P = np.eye(F.shape[0])
    out = np.zeros((zs.shape[0], F.shape[0]))
    for t in range(zs.shape[0]):
        x = F @ x
        P = F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = P @ H.T @ np.linalg.inv(S)
        x = x + K @ (zs[t] - H @ x)
        P = (np.eye(F.shape[0]) - K @ H) @ P
        out[t] = x
    return out

def edit_rows(a, b):
    n, m = a.shape[0], b.shape[0]
    prev = np.arange(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        cur = np.empty(m + 1, dtype=np.int64)
        cur[0] = i
        sub = prev[:-1] + (a[i - 1] != b)
        cur[1:] = np.minimum(sub, prev[1:] + 1)
        for j in range(1, m + 1):
            cur[j] = min(cur[j], cur[j - 1] + 1)
        prev = cur
    return prev[-1]

def add_at_hist(idx, w):
    h = np.zeros(8)
    np.add.at(h, idx, w)
    return h

def top_p(logits, p):
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    order = np.argsort(-probs)
    c = np.cumsum(probs[order])
    k = np.searchsorted(c, p) + 1
    keep = order[:k]
    out = np.zeros_like(probs)
    out[keep] = probs[keep]
    return out / out.sum()

def windows(x):
    w = np.lib.stride_tricks.sliding_window_view(x, 3)
    return w.mean(axis=-1)

def xent_arange(logits, y):
    z = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    return (lse - z[np.arange(z.shape[0]), y]).mean()

def cummax(x):
    return np.maximum.accumulate(x), np.minimum.accumulate(x[::-1])[::-1]

def kth(x):
    k = x.shape[0] // 2
    return np.partition(x, k)[k]

def padconv(img):
    p = np.pad(img, 1, mode="edge")
    return (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * img)

def layernorm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b

def einsum3(a, b, c):
    return np.einsum("ij,jk,kl->il", a, b, c)

def diff_cumsum(x):
    return np.diff(np.cumsum(x, axis=0), axis=0, prepend=0)

def sort_by_key(keys, vals):
    o = np.argsort(keys, kind="stable")
    return keys[o], vals[o]

def batch_gather(x, idx):
    rows = np.arange(x.shape[0])[:, None]
    return x[rows, idx]

def clip_out(x):
    np.clip(x, -1.0, 1.0, out=x)
    return x

def mandel(c, iters):
    z = np.zeros_like(c)
    count = np.zeros(c.shape, dtype=np.int64)
    for _ in range(iters):
        mask = np.abs(z) <= 2
        z[mask] = z[mask] ** 2 + c[mask]
        count += mask
    return count

def bubble(x):
    x = x.copy()
    n = x.shape[0]
    for i in range(n):
        for j in range(n - 1 - i):
            if x[j] > x[j + 1]:
                x[j], x[j + 1] = x[j + 1], x[j]
    return x

def seg_sum(vals, seg, nseg):
    out = np.zeros(nseg)
    for s in range(nseg):
        out[s] = vals[seg == s].sum()
    return out

def argmax_rows_loop(x):
    res = []
    for i in range(x.shape[0]):
        res.append(int(np.argmax(x[i])))
    return np.array(res)

def normalize_cols_inplace(x):
    x -= x.mean(axis=0)
    x /= x.std(axis=0) + 1e-8
    return x

def attention_mask_pad(q, k, lengths):
    s = q @ k.T / np.sqrt(q.shape[1])
    mask = np.arange(k.shape[0])[None, :] >= lengths[:, None]
    s = np.where(mask, -np.inf, s)
    s = s - s.max(1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(1, keepdims=True)

def power_conv(A):
    v = np.ones(A.shape[0]) / np.sqrt(A.shape[0])
    lam = 0.0
    for _ in range(100):
        w = A @ v
        new = np.linalg.norm(w)
        v = w / new
        if abs(new - lam) < 1e-10:
            break
        lam = new
    return lam
