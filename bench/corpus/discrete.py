"""Integer and irregular kernels (NPBench's crc16, nussinov, floyd_warshall,
spmv): bit manipulation over bytes, dynamic programming, all-pairs shortest
paths and a CSR sparse product with data-dependent slices."""
import numpy as np

from bench.corpus import kernel


def crc16(data, poly=0x8408):
    # CRC-16-CCITT, bit by bit
    crc = 0xFFFF
    for byte in data:
        cur = 0xFF & byte
        for _ in range(8):
            if (crc & 0x0001) ^ (cur & 0x0001):
                crc = (crc >> 1) ^ poly
            else:
                crc >>= 1
            cur >>= 1
    crc = ~crc & 0xFFFF
    crc = (crc << 8) | ((crc >> 8) & 0xFF)
    return crc & 0xFFFF


def nussinov(N, seq):
    # RNA folding: the maximum number of complementary base pairs of seq[i:j+1]
    table = np.zeros((N, N), np.int32)
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            best = np.maximum(table[i, j - 1], table[i + 1, j])
            pair = table[i + 1, j - 1]
            if i < j - 1:
                pair = pair + (seq[i] + seq[j] == 3)
            best = np.maximum(best, pair)
            if i + 1 < j:   # split into [i, k] and [k+1, j]
                best = np.maximum(best, np.max(table[i, i + 1:j] + table[i + 2:j + 1, j]))
            table[i, j] = best
    return table


def floyd_warshall(path):
    for k in range(path.shape[0]):
        np.minimum(path, np.add.outer(path[:, k], path[k, :]), out=path)


def spmv(A_row, A_col, A_val, x):
    # y = A @ x, A in CSR form (row pointers, column indices, values)
    y = np.empty(A_row.size - 1, A_val.dtype)
    for i in range(A_row.size - 1):
        lo, hi = A_row[i], A_row[i + 1]
        y[i] = A_val[lo:hi] @ x[A_col[lo:hi]]
    return y


# ------------------------------------------------------------------ inputs

def _init_crc16(rng, N):
    return (rng.integers(0, 256, size=N, dtype=np.uint8),)


def _init_nussinov(rng, N):
    return N, ((np.arange(N) + 1) % 4).astype(np.int32)


def _init_floyd_warshall(rng, N):
    i, j = np.indices((N, N))
    path = (i * j % 7 + 1).astype(np.int32)
    s = i + j
    path[(s % 13 == 0) | (s % 7 == 0) | (s % 11 == 0)] = 999
    return (path,)


def _init_spmv(rng, M, N, nnz):
    # a uniformly random sparse matrix with nnz entries, in CSR form
    flat = np.sort(rng.choice(M * N, size=nnz, replace=False))
    rows, cols = flat // N, flat % N
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=M))))
    return indptr.astype(np.uint32), cols.astype(np.uint32), rng.random(nnz), rng.random(N)


F = "discrete"
KERNELS = [
    kernel("crc16", crc16, _init_crc16, {"T": dict(N=6), "S": dict(N=1600), "M": dict(N=16000)}, family=F),
    kernel("nussinov", nussinov, _init_nussinov, {"T": dict(N=5), "S": dict(N=40), "M": dict(N=90)}, family=F),
    kernel("floyd_warshall", floyd_warshall, _init_floyd_warshall, {"T": dict(N=5), "S": dict(N=200),
                                                                    "M": dict(N=400)}, mutates=(0,), family=F),
    kernel("spmv", spmv, _init_spmv, {"T": dict(M=5, N=6, nnz=9), "S": dict(M=4096, N=4096, nnz=8192),
                                      "M": dict(M=32768, N=32768, nnz=65536)}, family=F),
]
