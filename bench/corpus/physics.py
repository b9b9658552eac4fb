"""Simulations and array programs (NPBench's "other" kernels): n-body, 2-D
Navier-Stokes (cavity and channel flow), great-circle distances, azimuthal
integration, Mandelbrot sets, and two small elementwise programs."""
import numpy as np

from bench.corpus import kernel


# ------------------------------------------------------------------ n-body

def _accelerations(pos, mass, G, softening):
    x, y, z = pos[:, 0:1], pos[:, 1:2], pos[:, 2:3]
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z
    inv_r3 = dx ** 2 + dy ** 2 + dz ** 2 + softening ** 2
    positive = inv_r3 > 0
    inv_r3[positive] = inv_r3[positive] ** (-1.5)
    ax = G * (dx * inv_r3) @ mass
    ay = G * (dy * inv_r3) @ mass
    az = G * (dz * inv_r3) @ mass
    return np.hstack((ax, ay, az))


def _energies(pos, vel, mass, G):
    kinetic = 0.5 * np.sum(mass * vel ** 2)
    x, y, z = pos[:, 0:1], pos[:, 1:2], pos[:, 2:3]
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z
    inv_r = np.sqrt(dx ** 2 + dy ** 2 + dz ** 2)
    inv_r[inv_r > 0] = 1.0 / inv_r[inv_r > 0]
    potential = G * np.sum(np.triu(-(mass * mass.T) * inv_r, 1))
    return kinetic, potential


def nbody(mass, pos, vel, N, Nt, dt, G, softening):
    # leapfrog (kick-drift-kick) integration of N bodies under gravity
    vel -= np.mean(mass * vel, axis=0) / np.mean(mass)
    acc = _accelerations(pos, mass, G, softening)
    KE = np.empty(Nt + 1, dtype=np.float64)
    PE = np.empty(Nt + 1, dtype=np.float64)
    KE[0], PE[0] = _energies(pos, vel, mass, G)
    for i in range(Nt):
        vel += acc * dt / 2.0
        pos += vel * dt
        acc = _accelerations(pos, mass, G, softening)
        vel += acc * dt / 2.0
        KE[i + 1], PE[i + 1] = _energies(pos, vel, mass, G)
    return KE, PE


# -------------------------------------------------- 2-D Navier-Stokes

def _source_term(b, rho, dt, u, v, dx, dy):
    dudx = (u[1:-1, 2:] - u[1:-1, :-2]) / (2 * dx)
    dudy = (u[2:, 1:-1] - u[:-2, 1:-1]) / (2 * dy)
    dvdx = (v[1:-1, 2:] - v[1:-1, :-2]) / (2 * dx)
    dvdy = (v[2:, 1:-1] - v[:-2, 1:-1]) / (2 * dy)
    b[1:-1, 1:-1] = rho * (1 / dt * (dudx + dvdy) - dudx ** 2 - 2 * (dudy * dvdx) - dvdy ** 2)


def _pressure_poisson(nit, p, dx, dy, b):
    for it in range(nit):
        pn = p.copy()
        p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, :-2]) * dy ** 2 + (pn[2:, 1:-1] + pn[:-2, 1:-1]) * dx ** 2)
                         / (2 * (dx ** 2 + dy ** 2))
                         - dx ** 2 * dy ** 2 / (2 * (dx ** 2 + dy ** 2)) * b[1:-1, 1:-1])
        p[:, -1] = p[:, -2]
        p[0, :] = p[1, :]
        p[:, 0] = p[:, 1]
        p[-1, :] = 0


def cavity_flow(nx, ny, nt, nit, u, v, dt, dx, dy, p, rho, nu):
    b = np.zeros((ny, nx))
    for n in range(nt):
        un = u.copy()
        vn = v.copy()
        _source_term(b, rho, dt, u, v, dx, dy)
        _pressure_poisson(nit, p, dx, dy, b)
        c = (slice(1, -1), slice(1, -1))
        u[c] = (un[c] - un[c] * dt / dx * (un[c] - un[1:-1, :-2]) - vn[c] * dt / dy * (un[c] - un[:-2, 1:-1])
                - dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, :-2])
                + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2 * un[c] + un[1:-1, :-2])
                        + dt / dy ** 2 * (un[2:, 1:-1] - 2 * un[c] + un[:-2, 1:-1])))
        v[c] = (vn[c] - un[c] * dt / dx * (vn[c] - vn[1:-1, :-2]) - vn[c] * dt / dy * (vn[c] - vn[:-2, 1:-1])
                - dt / (2 * rho * dy) * (p[2:, 1:-1] - p[:-2, 1:-1])
                + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2 * vn[c] + vn[1:-1, :-2])
                        + dt / dy ** 2 * (vn[2:, 1:-1] - 2 * vn[c] + vn[:-2, 1:-1])))
        u[0, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
        u[-1, :] = 1    # the lid moves
        v[0, :] = 0
        v[-1, :] = 0
        v[:, 0] = 0
        v[:, -1] = 0


def _periodic_source(rho, dt, dx, dy, u, v):
    # the source term with periodic neighbours in x: column -1 wraps to 0
    ue = np.concatenate((u[:, -1:], u, u[:, :1]), axis=1)
    ve = np.concatenate((v[:, -1:], v, v[:, :1]), axis=1)
    dudx = (ue[1:-1, 2:] - ue[1:-1, :-2]) / (2 * dx)
    dudy = (ue[2:, 1:-1] - ue[:-2, 1:-1]) / (2 * dy)
    dvdx = (ve[1:-1, 2:] - ve[1:-1, :-2]) / (2 * dx)
    dvdy = (ve[2:, 1:-1] - ve[:-2, 1:-1]) / (2 * dy)
    b = np.zeros_like(u)
    b[1:-1, :] = rho * (1 / dt * (dudx + dvdy) - dudx ** 2 - 2 * (dudy * dvdx) - dvdy ** 2)
    return b


def _periodic_poisson(nit, p, dx, dy, b):
    for it in range(nit):
        pn = p.copy()
        east = np.roll(pn, -1, axis=1)
        west = np.roll(pn, 1, axis=1)
        p[1:-1, :] = (((east[1:-1] + west[1:-1]) * dy ** 2 + (pn[2:] + pn[:-2]) * dx ** 2)
                      / (2 * (dx ** 2 + dy ** 2))
                      - dx ** 2 * dy ** 2 / (2 * (dx ** 2 + dy ** 2)) * b[1:-1])
        p[-1, :] = p[-2, :]
        p[0, :] = p[1, :]


def channel_flow(nit, u, v, dt, dx, dy, p, rho, nu, F):
    # channel flow, periodic in x, driven by the force F, until the velocity settles
    udiff = 1.0
    stepcount = 0
    while udiff > 0.001:
        un = u.copy()
        vn = v.copy()
        b = _periodic_source(rho, dt, dx, dy, u, v)
        _periodic_poisson(nit, p, dx, dy, b)
        ue, ve = np.roll(un, -1, axis=1), np.roll(vn, -1, axis=1)   # east neighbours
        uw, vw = np.roll(un, 1, axis=1), np.roll(vn, 1, axis=1)     # west neighbours
        pe, pw = np.roll(p, -1, axis=1), np.roll(p, 1, axis=1)
        c = slice(1, -1)
        u[c] = (un[c] - un[c] * dt / dx * (un[c] - uw[c]) - vn[c] * dt / dy * (un[c] - un[:-2])
                - dt / (2 * rho * dx) * (pe[c] - pw[c])
                + nu * (dt / dx ** 2 * (ue[c] - 2 * un[c] + uw[c]) + dt / dy ** 2 * (un[2:] - 2 * un[c] + un[:-2]))
                + F * dt)
        v[c] = (vn[c] - un[c] * dt / dx * (vn[c] - vw[c]) - vn[c] * dt / dy * (vn[c] - vn[:-2])
                - dt / (2 * rho * dy) * (p[2:] - p[:-2])
                + nu * (dt / dx ** 2 * (ve[c] - 2 * vn[c] + vw[c]) + dt / dy ** 2 * (vn[2:] - 2 * vn[c] + vn[:-2])))
        u[0, :] = 0
        u[-1, :] = 0
        v[0, :] = 0
        v[-1, :] = 0
        udiff = (np.sum(u) - np.sum(un)) / np.sum(u)
        stepcount += 1
    return stepcount


# ------------------------------------------------------------ elementwise

def arc_distance(theta_1, phi_1, theta_2, phi_2):
    # haversine great-circle distance between pairs of points
    h = np.sin((theta_2 - theta_1) / 2) ** 2 + np.cos(theta_1) * np.cos(theta_2) * np.sin((phi_2 - phi_1) / 2) ** 2
    return 2 * np.arctan2(np.sqrt(h), np.sqrt(1 - h))


def go_fast(a):
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


def compute(array_1, array_2, a, b, c):
    return np.clip(array_1, 2, 10) * a + array_2 * b + c


# ------------------------------------------------------- azimuthal integration

def azimint_naive(data, radius, npt):
    rmax = radius.max()
    res = np.zeros(npt, dtype=np.float64)
    for i in range(npt):
        r1 = rmax * i / npt
        r2 = rmax * (i + 1) / npt
        in_ring = (r1 <= radius) & (radius < r2)
        res[i] = data[in_ring].mean()
    return res


def azimint_hist(data, radius, npt):
    counts = np.histogram(radius, npt)[0]
    sums = np.histogram(radius, npt, weights=data)[0]
    return sums / counts


# ------------------------------------------------------------- Mandelbrot

def mandelbrot1(xmin, xmax, ymin, ymax, xn, yn, maxiter, horizon=2.0):
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)
    C = X + Y[:, None] * 1j
    N = np.zeros(C.shape, dtype=np.int64)
    Z = np.zeros(C.shape, dtype=np.complex128)
    for n in range(maxiter):
        inside = np.abs(Z) < horizon
        N[inside] = n
        Z[inside] = Z[inside] ** 2 + C[inside]
    N[N == maxiter - 1] = 0
    return Z, N


def mandelbrot2(xmin, xmax, ymin, ymax, xn, yn, itermax, horizon=2.0):
    # iterates only the points that have not escaped yet (the active set shrinks)
    Xi, Yi = np.mgrid[0:xn, 0:yn]
    C = np.linspace(xmin, xmax, xn)[Xi] + np.linspace(ymin, ymax, yn)[Yi] * 1j
    N_ = np.zeros(C.shape, dtype=np.int64)
    Z_ = np.zeros(C.shape, dtype=np.complex128)
    Xi = Xi.reshape(-1)
    Yi = Yi.reshape(-1)
    C = C.reshape(-1)
    Z = np.zeros(C.shape, np.complex128)
    for i in range(itermax):
        if not len(Z):
            break
        Z = Z * Z + C
        escaped = np.abs(Z) > horizon
        N_[Xi[escaped], Yi[escaped]] = i + 1
        Z_[Xi[escaped], Yi[escaped]] = Z[escaped]
        alive = ~escaped
        Z = Z[alive]
        Xi, Yi = Xi[alive], Yi[alive]
        C = C[alive]
    return Z_.T, N_.T


# ------------------------------------------------------------------ inputs

def _init_nbody(rng, N, tEnd, dt, softening, G):
    mass = 20.0 * np.ones((N, 1)) / N
    pos = rng.random((N, 3))
    vel = rng.random((N, 3))
    Nt = int(np.ceil(tEnd / dt))
    return mass, pos, vel, N, Nt, dt, G, softening


def _init_flow(p_init):
    def init(rng, ny, nx, nt=None, nit=5, rho=1.0, nu=0.1, F=1.0):
        u = np.zeros((ny, nx))
        v = np.zeros((ny, nx))
        p = np.zeros((ny, nx)) if p_init == 0 else np.ones((ny, nx))
        dx = 2 / (nx - 1)
        dy = 2 / (ny - 1)
        dt = 0.1 / ((nx - 1) * (ny - 1))
        if nt is not None:   # cavity_flow
            return nx, ny, nt, nit, u, v, dt, dx, dy, p, rho, nu
        return nit, u, v, dt, dx, dy, p, rho, nu, F
    return init


def _init_arc(rng, N):
    return rng.random(N), rng.random(N), rng.random(N), rng.random(N)


def _init_go_fast(rng, N):
    return (rng.random((N, N)),)


def _init_compute(rng, M, N):
    array_1 = rng.uniform(0, 1000, size=(M, N)).astype(np.int64)
    array_2 = rng.uniform(0, 1000, size=(M, N)).astype(np.int64)
    return array_1, array_2, np.int64(4), np.int64(3), np.int64(9)


def _init_azimint(rng, N, npt):
    return rng.random(N), rng.random(N), npt


def _init_mandelbrot(rng, xmin, xmax, XN, ymin, ymax, YN, maxiter, horizon):
    return xmin, xmax, ymin, ymax, XN, YN, maxiter, horizon


_M1 = dict(xmin=-1.75, xmax=0.25, ymin=-1.0, ymax=1.0, horizon=2.0)
_M2 = dict(xmin=-2.0, xmax=0.5, ymin=-1.25, ymax=1.25, horizon=2.0)
F = "physics"
KERNELS = [
    kernel("nbody", nbody, _init_nbody, {
        "T": dict(N=4, tEnd=0.2, dt=0.05, softening=0.1, G=1.0),
        "S": dict(N=25, tEnd=2.0, dt=0.05, softening=0.1, G=1.0),
        "M": dict(N=50, tEnd=5.0, dt=0.02, softening=0.1, G=1.0)}, mutates=(1, 2), family=F,
        # chaotic: 1e-16 relative in the initial positions moves numpy's own energies by ~1e-9
        # after the 40 steps of S and by 10-17% after the 250 of M (values not comparable there)
        rtol={"T": 1e-6, "S": 1e-6, "M": float("inf")}),
    kernel("cavity_flow", cavity_flow, _init_flow(0), {
        "T": dict(ny=5, nx=6, nt=3, nit=2), "S": dict(ny=61, nx=61, nt=25, nit=5),
        "M": dict(ny=121, nx=121, nt=50, nit=10)}, mutates=(4, 5, 9), family=F),
    kernel("channel_flow", channel_flow, _init_flow(1), {
        "T": dict(ny=5, nx=6, nit=2, nu=50.0), "S": dict(ny=61, nx=61, nit=5),   # T: viscous, settles in 4 steps
        "M": dict(ny=121, nx=121, nit=10)}, mutates=(1, 2, 6), family=F),
    kernel("arc_distance", arc_distance, _init_arc, {"T": dict(N=7), "S": dict(N=100000),
                                                     "M": dict(N=1000000)}, family=F),
    kernel("go_fast", go_fast, _init_go_fast, {"T": dict(N=5), "S": dict(N=2000), "M": dict(N=6000)}, family=F),
    kernel("compute", compute, _init_compute, {"T": dict(M=4, N=5), "S": dict(M=2000, N=2000),
                                               "M": dict(M=5000, N=5000)}, family=F),
    kernel("azimint_naive", azimint_naive, _init_azimint, {"T": dict(N=64, npt=4), "S": dict(N=400000, npt=1000),
                                                           "M": dict(N=4000000, npt=1000)}, family=F),
    kernel("azimint_hist", azimint_hist, _init_azimint, {"T": dict(N=64, npt=4), "S": dict(N=400000, npt=1000),
                                                         "M": dict(N=4000000, npt=1000)}, family=F),
    kernel("mandelbrot1", mandelbrot1, _init_mandelbrot, {
        "T": dict(_M1, XN=6, YN=5, maxiter=4), "S": dict(_M1, XN=125, YN=125, maxiter=60),
        "M": dict(_M1, XN=250, YN=250, maxiter=150)}, family=F),
    kernel("mandelbrot2", mandelbrot2, _init_mandelbrot, {
        "T": dict(_M2, XN=6, YN=5, maxiter=4), "S": dict(_M2, XN=200, YN=200, maxiter=40),
        "M": dict(_M2, XN=500, YN=500, maxiter=80)}, family=F),
]
