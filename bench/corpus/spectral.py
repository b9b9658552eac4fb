"""Complex-valued kernels (NPBench's quantum-transport and FFT kernels):
a contour integral of resolvents, a radix-R Stockham FFT, and scattering
self-energies with neighbour gathers and batched products.  shapejit runs
complex dtypes eagerly; the results must still be numpy's."""
import numpy as np

from bench.corpus import kernel


def contour_integral(NR, NM, slab_per_bc, Ham, int_pts, Y):
    P0 = np.zeros((NR, NM), dtype=np.complex128)
    P1 = np.zeros((NR, NM), dtype=np.complex128)
    for z in int_pts:
        Tz = np.zeros((NR, NR), dtype=np.complex128)
        for n in range(slab_per_bc + 1):
            Tz += np.power(z, slab_per_bc / 2 - n) * Ham[n]
        if NR == NM:
            X = np.linalg.inv(Tz)
        else:
            X = np.linalg.solve(Tz, Y)
        if abs(z) < 1.0:
            X = -X
        P0 += X
        P1 += z * X
    return P0, P1


def stockham_fft(N, R, K, x, y):
    r = np.arange(R)
    dft = np.exp(-2.0j * np.pi * r[:, None] * r[None, :] / R)
    y[:] = x
    for s in range(K):
        lo, hi = R ** s, R ** (K - s - 1)
        perm = np.transpose(np.reshape(y, (lo, R, hi)), (1, 0, 2))
        twiddle = np.exp(-2.0j * np.pi * r[:, None] * np.arange(lo)[None, :] / R ** (s + 1))
        D = np.repeat(twiddle.reshape(R, lo, 1), hi, axis=2)
        t = np.reshape(perm, (N,)) * np.reshape(D, (N,))
        y[:] = np.reshape(dft @ np.reshape(t, (R, R ** (K - 1))), (N,))


def scattering_self_energies(neigh_idx, dH, G, D, Sigma):
    Nkz, NE = G.shape[0], G.shape[1]
    Nqz, Nw, N3D = D.shape[0], D.shape[1], D.shape[-1]
    for k in range(Nkz):
        for E in range(NE):
            for q in range(Nqz):
                for w in range(min(Nw, E + 1)):          # only E - w >= 0
                    Gn = G[k, E - w][neigh_idx]           # (NA, NB, Norb, Norb): each atom's neighbours
                    for i in range(N3D):
                        dHG = Gn @ dH[:, :, i]
                        for j in range(N3D):
                            dHD = dH[:, :, j] * D[q, w, :, :, i, j, None, None]
                            Sigma[k, E] += (dHG @ dHD).sum(axis=1)


# ------------------------------------------------------------------ inputs

def _complex(rng, shape):
    return rng.random(shape) + rng.random(shape) * 1j


def _init_contour(rng, NR, NM, slab_per_bc, num_int_pts):
    Ham = _complex(rng, (slab_per_bc + 1, NR, NR))
    int_pts = _complex(rng, (num_int_pts,))
    Y = _complex(rng, (NR, NM))
    return NR, NM, slab_per_bc, Ham, int_pts, Y


def _init_fft(rng, R, K):
    N = R ** K
    x = _complex(rng, (N,))
    return N, R, K, x, np.zeros_like(x)


def _init_scattering(rng, Nkz, NE, Nqz, Nw, N3D, NA, NB, Norb):
    neigh_idx = ((np.arange(NA)[:, None] + np.arange(NB)[None, :] - (NB + 1) // 2) % NA).astype(np.int32)
    dH = _complex(rng, (NA, NB, N3D, Norb, Norb))
    G = _complex(rng, (Nkz, NE, NA, Norb, Norb))
    D = _complex(rng, (Nqz, Nw, NA, NB, N3D, N3D))
    Sigma = np.zeros((Nkz, NE, NA, Norb, Norb), dtype=np.complex128)
    return neigh_idx, dH, G, D, Sigma


F = "complex"
KERNELS = [
    kernel("contour_integral", contour_integral, _init_contour, {
        "T": dict(NR=4, NM=5, slab_per_bc=2, num_int_pts=3),
        "S": dict(NR=50, NM=150, slab_per_bc=2, num_int_pts=32),
        "M": dict(NR=200, NM=400, slab_per_bc=2, num_int_pts=32)}, family=F),
    kernel("stockham_fft", stockham_fft, _init_fft, {"T": dict(R=2, K=3), "S": dict(R=2, K=15),
                                                     "M": dict(R=2, K=18)}, mutates=(4,), family=F),
    kernel("scattering_self_energies", scattering_self_energies, _init_scattering, {
        "T": dict(Nkz=2, NE=3, Nqz=2, Nw=2, N3D=2, NA=3, NB=2, Norb=2),
        "S": dict(Nkz=2, NE=4, Nqz=2, Nw=2, N3D=2, NA=6, NB=2, Norb=3),
        "M": dict(Nkz=3, NE=5, Nqz=3, Nw=2, N3D=2, NA=10, NB=3, Norb=4)}, mutates=(4,), family=F),
]
