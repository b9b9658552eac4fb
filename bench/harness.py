"""Timing: warm-up, then the median of adaptive repeats (time.perf_counter).

A *sample* is the mean time of ``number`` back-to-back calls; ``number`` is
chosen so one sample lasts at least ``min_sample`` seconds (this keeps the
perf_counter overhead out of microsecond calls).  The number of samples is
chosen so that all of them together take about ``target`` seconds, within
``[min_repeats, max_repeats]``.  The median of the samples is reported: on a
noisy shared machine it is much steadier than the mean or the minimum.

Other processes on the machine are the main source of error: with two cores,
one busy neighbour stalls every parallel region of a two-thread library for a
scheduler time slice.  ``measure`` therefore also records the *foreign load*
(cores used by other processes while the samples ran, from /proc/stat minus
this process's own CPU time) and re-measures a cell up to ``retries`` times,
keeping the attempt with the least foreign load.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Budget:
    target: float = 0.4        # seconds of timed samples per cell
    min_repeats: int = 5
    max_repeats: int = 200
    min_sample: float = 2e-4   # seconds per sample (calls are batched below it)
    warmup: int = 2
    retries: int = 2           # re-measure when other processes were busy ...
    retry_limit: float = 5.0   # ... unless one attempt took longer than this (s)


FULL = Budget()
QUICK = Budget(target=0.12, min_repeats=5, max_repeats=60, warmup=1, retries=1, retry_limit=1.0)
BUSY = 0.3                     # foreign load (cores) above which a cell is re-measured


@dataclass
class Timing:
    median: float              # seconds per call
    samples: list = field(repr=False, default_factory=list)
    calls: int = 0
    foreign_load: float = 0.0  # cores used by other processes meanwhile

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (noise indicator)."""
        if len(self.samples) < 4:
            return 0.0
        q = statistics.quantiles(self.samples, n=4)
        return (q[2] - q[0]) / self.median if self.median else 0.0


class LoadMeter:
    """Cores used by *other* processes between ``start()`` and ``stop()``.

    Resolution is the kernel's clock tick (10 ms), so over short windows this
    is a rough indicator, good enough to tell "idle" from "a neighbour is busy".
    """

    def __init__(self):
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def _busy(self):
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except OSError:
            return None
        return (sum(v) - v[3] - v[4]) / self.hz     # all but idle and iowait

    @staticmethod
    def _own():
        t = os.times()          # this process and its waited-for children
        return t.user + t.system + t.children_user + t.children_system

    def start(self):
        self._t0 = (time.perf_counter(), self._own(), self._busy())
        return self

    def stop(self) -> float:
        wall0, own0, busy0 = self._t0
        wall, own, busy = time.perf_counter() - wall0, self._own() - own0, self._busy()
        if busy is None or busy0 is None or wall <= 0:
            return 0.0
        return max(0.0, (busy - busy0 - own) / wall)


def measure(call, budget: Budget = FULL) -> Timing:
    """Median per-call time of ``call()`` (no arguments; must synchronise).

    Re-measured (up to ``budget.retries`` times) while other processes keep
    more than ``BUSY`` cores busy; the attempt with the least foreign load wins.
    """
    return measure_interleaved([call], budget)[0]


def measure_interleaved(calls, budget: Budget = FULL) -> list:
    """``measure`` of several calls at once, their samples interleaved (a
    sample of each in turn): the ratio of two of them is free of the drift
    of a shared machine between two separate measurements."""
    best = None
    for attempt in range(budget.retries + 1):
        t0 = time.perf_counter()
        t = _measure_once(calls, budget if attempt == 0 else replace(budget, warmup=0))
        if best is None or t[0].foreign_load < best[0].foreign_load:
            best = t
        if t[0].foreign_load < BUSY or time.perf_counter() - t0 > budget.retry_limit:
            break
        time.sleep(0.2 * (attempt + 1))   # let the neighbour's burst pass
    return best


def _measure_once(calls, budget: Budget) -> list:
    numbers = []
    for call in calls:
        for _ in range(budget.warmup):
            call()
        t0 = time.perf_counter()
        call()
        one = max(time.perf_counter() - t0, 1e-9)
        numbers.append((max(1, int(budget.min_sample / one)), one))
    per_round = sum(n * one for n, one in numbers)  # one sample of every call
    repeats = int(budget.target * len(calls) / per_round)
    repeats = max(budget.min_repeats, min(budget.max_repeats, repeats))

    meter = LoadMeter()
    meter.start()
    samples = [[] for _ in calls]
    for _ in range(repeats):
        for call, (number, _), out in zip(calls, numbers, samples):
            t0 = time.perf_counter()
            for _ in range(number):
                call()
            out.append((time.perf_counter() - t0) / number)
    load = meter.stop()
    return [Timing(statistics.median(x), x, repeats * n, load) for x, (n, _) in zip(samples, numbers)]


def in_turns(calls, rounds: int, warm: float = 0.12, turn: float = 0.05, settle: float = 0.0) -> list:
    """The median over `rounds` of each call's median time in a turn (`turns`)."""
    return [statistics.median(x) for x in turns(calls, rounds, warm, turn, settle)]


def turns(calls, rounds: int, warm: float = 0.12, turn: float = 0.05, settle: float = 0.0) -> list:
    """Each call's median time in each of `rounds` turns: every round gives
    each call a turn, in a new order (the machine's drift falls on all
    alike), each turn `settle` seconds idle (the last call's thread pools go
    to sleep), then `warm` seconds of untimed calls (its own threads awake),
    then `turn` seconds of timed calls (at least 3)."""
    order, seats = random.Random(0), list(range(len(calls)))
    samples = [[] for _ in calls]
    for _ in range(rounds):
        order.shuffle(seats)
        for i in seats:
            time.sleep(settle)
            end = time.perf_counter() + warm
            while time.perf_counter() < end:
                calls[i]()
            times, end = [], time.perf_counter() + turn
            while time.perf_counter() < end or len(times) < 3:
                t0 = time.perf_counter()
                calls[i]()
                times.append(time.perf_counter() - t0)
            samples[i].append(statistics.median(times))
    return samples


def time_once(call):
    """(seconds, result) of a single call, e.g. a first call that compiles."""
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out


def best_of(call, repeats: int) -> float:
    """Minimum time over ``repeats`` calls (for machine-limit probes)."""
    best = float("inf")
    for _ in range(repeats):
        t, _ = time_once(call)
        best = min(best, t)
    return best


# This machine's own artifacts (compile cache key -> (record, kind, name)):
# its calibrated GEMM dispatch and the libraries compiled once per machine
# (the GEMM of each dtype, the thread pool's helpers; jit/compile.py
# library_spec), carried into every compile cache the bench makes: it
# measures a machine that has run shapejit before, as a user's has, not one
# calibrating in the background while it is timed (runtime/dispatch.py).
MACHINE: dict = {}


def keep_machine_artifacts(calibrate=("float32",)) -> None:
    """Read this machine's calibrations and libraries from the user's compile
    cache, calibrating the dtypes `calibrate` (and so compiling their GEMMs)
    there first when it has none (seconds each)."""
    import numpy as np
    from codegen import gemm, parallel
    from jit import compile as compile_mod
    from runtime.cache import default_cache
    symbols = [parallel.POOL_RUN]
    for dtype in (np.float32, np.float64):
        key = compile_mod._dispatch_key(dtype)
        blob, _ = default_cache().get(key, memory=False)
        if blob is None and np.dtype(dtype).name in calibrate:
            compile_mod.calibrate_gemm(dtype)
            blob, _ = default_cache().get(key, memory=False)
        if blob is not None:  # (a GEMM loaded uncalibrated would start a calibration beside the timings)
            MACHINE[key] = (blob, "calibration", "(gemm dispatch)", np.dtype(dtype).name)
            symbols.append(gemm.symbol_for(dtype))
    for symbol in symbols:
        compile_mod.library_function(symbol)  # (compiled into the user's cache if it was not there)
        key, name, _, _ = compile_mod.library_spec(symbol)
        blob, _ = default_cache().get(key, memory=False)
        if blob is not None:
            MACHINE[key] = (blob, "library", "(library)", name)


def seed_machine_artifacts(directory) -> None:
    """Put the kept machine artifacts into the compile cache at `directory`."""
    from runtime.cache import ArtifactCache
    cache = ArtifactCache(directory=str(directory))
    for key, (blob, kind, function, signature) in MACHINE.items():
        cache.put(key, blob, function, signature, kind=kind)


def print_choice() -> bool:
    """Load the float32 GEMM (and with it this CPU's calibrated dispatch,
    when the cache has one) and say how shapejit chooses each product's
    variant: -> whether the calibrated tree decides."""
    import numpy as np
    from codegen import gemm
    from jit.compile import gemm_dispatch, library_function
    library_function(gemm.symbol_for(np.float32))
    tree = "f" in gemm_dispatch()
    print("shapejit's choice: " + ("the dispatch tree calibrated on this CPU (python -m jit calibrate): no class "
                                   "is raced" if tree else "raced at each shape class's first call"))
    return tree
