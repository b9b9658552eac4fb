"""Tests for the LLVM path: IR -> Artifact -> bytes -> load -> call / parallel_for."""

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
from llvmlite import ir

from codegen.artifact import Artifact, ArtifactError, KernelInfo
from codegen.llvm import I64, compile_ir, for_range, host_target, loop_nest, optimize_ir
from runtime import threadpool
from runtime.loader import LoadError, load
from tests.conftest import run_in_threads

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F32 = ir.FloatType()
F64 = ir.DoubleType()


# ---------------------------------------------------------------------------
# kernels


def axpb_ir() -> str:
    """void k_axpb(i64 start, i64 stop, float* a, float* b, float* out, i64 n):
    out[i, :] = a[i, :] + 2 * b[i, :] for rows i in [start, stop)."""
    m = ir.Module(name="axpb")
    f32p = ir.PointerType(F32)
    fnty = ir.FunctionType(ir.VoidType(), [I64, I64, f32p, f32p, f32p, I64])
    fn = ir.Function(m, fnty, "k_axpb")
    start, stop, a, b, out, n = fn.args
    for p in (a, b, out):
        p.add_attribute("noalias")
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(bld, start, stop) as row:
        row_off = bld.mul(row, n)
        with for_range(bld, 0, n) as j:
            idx = bld.add(row_off, j)
            av = bld.load(bld.gep(a, [idx], inbounds=True))
            bv = bld.load(bld.gep(b, [idx], inbounds=True))
            res = bld.fadd(av, bld.fmul(bv, ir.Constant(F32, 2.0)))
            bld.store(res, bld.gep(out, [idx], inbounds=True))
    bld.ret_void()
    return str(m)


AXPB = KernelInfo("k_axpb", n_ptr_args=3, n_int_args=1)


def ramp_ir() -> str:
    """Two kernels using loop_nest, a float arg and a count-down loop.

    k_ramp(start, stop, double* out, i64 n, double s): out[i, j] = s*i + j
    k_zero(start, stop, double* out, i64 n): out[i, :] = 0 (becomes memset)
    """
    m = ir.Module(name="ramp")
    f64p = ir.PointerType(F64)
    fn = ir.Function(
        m, ir.FunctionType(ir.VoidType(), [I64, I64, f64p, I64, F64]), "k_ramp"
    )
    start, stop, out, n, s = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    nrows = bld.sub(stop, start)
    with loop_nest(bld, [nrows, n]) as (r, j):
        i = bld.add(r, start)
        val = bld.fadd(bld.fmul(s, bld.sitofp(i, F64)), bld.sitofp(j, F64))
        bld.store(val, bld.gep(out, [bld.add(bld.mul(i, n), j)], inbounds=True))
    bld.ret_void()

    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64, I64, f64p, I64]), "k_zero")
    start, stop, out, n = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    # rows counted down: i = stop-1 .. start
    with for_range(bld, bld.sub(stop, ir.Constant(I64, 1)), bld.sub(start, ir.Constant(I64, 1)), -1) as i:
        with for_range(bld, 0, n) as j:
            ptr = bld.gep(out, [bld.add(bld.mul(i, n), j)], inbounds=True)
            bld.store(ir.Constant(F64, 0.0), ptr)
    bld.ret_void()
    return str(m)


RAMP_KERNELS = (KernelInfo("k_ramp", 1, 1, 1), KernelInfo("k_zero", 1, 1))


@pytest.fixture(scope="module")
def axpb_artifact():
    return compile_ir(axpb_ir(), [AXPB], metadata={"name": "axpb", "rank": 2})


@pytest.fixture(scope="module")
def axpb(axpb_artifact):
    return load(Artifact.from_bytes(axpb_artifact.to_bytes()))


def arrays(rows=97, n=131, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, n), dtype=np.float32)
    b = rng.standard_normal((rows, n), dtype=np.float32)
    return a, b, np.zeros_like(a)


def ptrs(*arrs):
    return tuple(x.ctypes.data for x in arrs)


# ---------------------------------------------------------------------------
# compile / artifact


def test_host_target_cached():
    assert host_target() is host_target()
    assert host_target().triple


def test_artifact_fields_and_roundtrip(axpb_artifact):
    art = axpb_artifact
    assert art.kernels == (AXPB,)
    assert art.objects[0][:4] == b"\x7fELF" or sys.platform != "linux"
    assert art.llvm_version.split(".")[0].isdigit()
    data = art.to_bytes()
    back = Artifact.from_bytes(data)
    assert back == art
    assert back.metadata == {"name": "axpb", "rank": 2}
    assert back.kernel("k_axpb").n_args == 6
    assert hash(back) == hash(art)


def test_optimized_ir_is_vectorized():
    opt = optimize_ir(axpb_ir())
    assert re.search(r"<\d+ x float>", opt), opt


def test_dump_to_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPEJIT_DUMP_LLVM", str(tmp_path))
    compile_ir(axpb_ir(), [AXPB])
    before = sorted(tmp_path.glob("k_axpb.*.before.ll"))
    after = sorted(tmp_path.glob("k_axpb.*.after.ll"))
    assert len(before) == len(after) == 1
    assert not re.search(r"<\d+ x float>", before[0].read_text())
    assert re.search(r"<\d+ x float>", after[0].read_text())


def test_dump_to_stderr(monkeypatch, capsys):
    monkeypatch.setenv("SHAPEJIT_DUMP_LLVM", "1")
    optimize_ir(axpb_ir())
    err = capsys.readouterr().err
    assert "(before)" in err and "(after)" in err and "k_axpb" in err


def test_signature_mismatch_rejected():
    with pytest.raises(ArtifactError, match="signature"):
        compile_ir(axpb_ir(), [KernelInfo("k_axpb", 2, 1)])
    with pytest.raises(ArtifactError, match="not defined"):
        compile_ir(axpb_ir(), [KernelInfo("nope", 3, 1)])


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: b"", id="empty"),
        pytest.param(lambda d: d[:20], id="truncated-header"),
        pytest.param(lambda d: d[:-1], id="truncated-payload"),
        pytest.param(lambda d: d + b"x", id="trailing"),
        pytest.param(lambda d: b"NOTMAGIC" + d[8:], id="magic"),
        pytest.param(lambda d: d[:8] + b"\x63\x00\x00\x00" + d[12:], id="version"),
        pytest.param(lambda d: d[:-5] + bytes([d[-5] ^ 1]) + d[-4:], id="flip-code"),
        pytest.param(lambda d: d[:70] + bytes([d[70] ^ 0x40]) + d[71:], id="flip-header"),
        pytest.param(lambda d: bytes(range(256)) * 4, id="garbage"),
    ],
)
def test_corrupted_bytes_raise(axpb_artifact, mutate):
    with pytest.raises(ArtifactError):
        Artifact.from_bytes(mutate(axpb_artifact.to_bytes()))


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x05\x00\x00\x00{}", b"\x02\x00\x00\x00{}", b"\x04\x00\x00\x00\xff\xfe{}", b"\x02\x00\x00\x00[]"],
    ids=["empty", "short-header", "missing-keys", "bad-utf8", "not-a-dict"],
)
def test_well_checksummed_but_malformed_payload_raises(payload):
    import hashlib
    import struct

    from codegen import artifact as artifact_mod

    data = struct.pack(
        "<8sIQ32s", artifact_mod.MAGIC, artifact_mod.FORMAT_VERSION, len(payload),
        hashlib.sha256(payload).digest(),
    ) + payload
    with pytest.raises(ArtifactError):
        Artifact.from_bytes(data)


def test_non_json_metadata_rejected(axpb_artifact):
    bad = dataclasses.replace(axpb_artifact, metadata={"x": object()})
    with pytest.raises(ArtifactError):
        bad.to_bytes()


def test_foreign_cpu_rejected(axpb_artifact):
    other = dataclasses.replace(axpb_artifact, cpu="some-other-cpu")
    with pytest.raises(LoadError, match="compiled for"):
        load(other)


# ---------------------------------------------------------------------------
# load and call


def test_call_through_ctypes(axpb):
    a, b, out = arrays()
    k = axpb["k_axpb"]
    k(0, a.shape[0], *ptrs(a, b, out), a.shape[1])
    np.testing.assert_array_equal(out, a + 2 * b)
    # only rows [5, 9) are touched
    out[:] = -1
    k(5, 9, *ptrs(a, b, out), a.shape[1])
    np.testing.assert_array_equal(out[5:9], (a + 2 * b)[5:9])
    assert (out[:5] == -1).all() and (out[9:] == -1).all()
    assert axpb.address("k_axpb") == axpb.addresses["k_axpb"] != 0


def test_function_keeps_code_alive(axpb_artifact):
    k = load(axpb_artifact)["k_axpb"]  # LoadedArtifact dropped at once
    a, b, out = arrays(rows=3, n=5)
    k(0, 3, *ptrs(a, b, out), 5)
    np.testing.assert_array_equal(out, a + 2 * b)


def test_loop_nest_float_arg_countdown_and_memset():
    loaded = load(compile_ir(ramp_ir(), RAMP_KERNELS))
    out = np.full((6, 7), 5.0)
    loaded["k_ramp"](1, 5, out.ctypes.data, 7, 10.0)
    i, j = np.indices(out.shape)
    want = np.where((i >= 1) & (i < 5), 10.0 * i + j, 5.0)
    np.testing.assert_array_equal(out, want)
    loaded["k_zero"](2, 4, out.ctypes.data, 7)
    want[2:4] = 0.0
    np.testing.assert_array_equal(out, want)


def shared_ir() -> str:
    """Four kernels k(start, stop, double* out): k_a and k_b read one
    internal table; k_a calls an internal helper and k_a_par calls k_a;
    k_b and k_d share a non-internal global counter (so they stay in one
    part); k_c stands alone.  Each writes out[i] for i in [start, stop)."""
    m = ir.Module(name="shared")
    f64p = ir.PointerType(F64)
    kty = ir.FunctionType(ir.VoidType(), [I64, I64, f64p])
    table = ir.GlobalVariable(m, ir.ArrayType(F64, 4), "tab")
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(ir.ArrayType(F64, 4), [1.0, 2.0, 3.0, 4.0])
    counter = ir.GlobalVariable(m, I64, "sj_calls")
    counter.initializer = ir.Constant(I64, 0)
    helper = ir.Function(m, ir.FunctionType(F64, [F64]), "helper")
    helper.linkage = "internal"
    b = ir.IRBuilder(helper.append_basic_block())
    b.ret(b.fmul(helper.args[0], ir.Constant(F64, 10.0)))

    def kernel(name, value):
        fn = ir.Function(m, kty, name)
        start, stop, out = fn.args
        bld = ir.IRBuilder(fn.append_basic_block("entry"))
        with for_range(bld, start, stop) as i:
            bld.store(value(bld, i), bld.gep(out, [i], inbounds=True))
        bld.ret_void()
        return fn

    def from_table(bld, i):
        return bld.load(bld.gep(table, [ir.Constant(I64, 0), bld.and_(i, ir.Constant(I64, 3))], inbounds=True))

    def counted(bld, i):
        bld.store(bld.add(bld.load(counter), ir.Constant(I64, 1)), counter)
        return bld.sitofp(bld.load(counter), F64)
    k_a = kernel("k_a", lambda bld, i: bld.call(helper, [from_table(bld, i)]))
    kernel("k_b", lambda bld, i: (bld.load(counter), from_table(bld, i))[1])
    kernel("k_c", lambda bld, i: bld.sitofp(bld.mul(i, i), F64))
    kernel("k_d", counted)
    par = ir.Function(m, kty, "k_a_par")
    bld = ir.IRBuilder(par.append_basic_block())
    bld.call(k_a, par.args)
    bld.ret_void()
    return str(m)


SHARED = tuple(KernelInfo(k, 1) for k in ("k_a", "k_a_par", "k_b", "k_c", "k_d"))


def test_a_module_is_split_into_parts_that_keep_what_references_each_other_together(monkeypatch):
    from codegen import llvm as llvm_mod
    monkeypatch.setattr(llvm_mod, "PART_LINES", 1)
    text = shared_ir()
    assert llvm_mod.split_module(text, 1) == [None]
    parts = llvm_mod.split_module(text, 8)
    units = [{"k_a", "k_a_par", "helper"}, {"k_b", "k_d", "sj_calls"}, {"k_c"}]
    assert sorted(map(sorted, parts)) == sorted(map(sorted, units))
    two = llvm_mod.split_module(text, 2)
    assert len(two) == 2 and set().union(*two) == set().union(*units)
    assert all(any(u <= p for p in two) for u in units)
    monkeypatch.setattr(llvm_mod, "PART_LINES", 10 ** 6)
    assert llvm_mod.split_module(text, 8) == [None]
    # an internal variable (state, not a constant) is one: the kernels reading it stay in one part
    m = ir.Module(name="state")
    state = ir.GlobalVariable(m, I64, "state")
    state.linkage = "internal"
    state.initializer = ir.Constant(I64, 0)
    for name in ("k_x", "k_y", "k_z"):
        bld = ir.IRBuilder(ir.Function(m, ir.FunctionType(ir.VoidType(), [I64]), name).append_basic_block())
        if name != "k_z":
            bld.store(bld.add(bld.load(state), ir.Constant(I64, 1)), state)
        bld.ret_void()
    monkeypatch.setattr(llvm_mod, "PART_LINES", 1)
    assert sorted(map(sorted, llvm_mod.split_module(str(m), 4))) == [["k_x", "k_y", "state"], ["k_z"]]


def _check_shared(lib):
    for k, want in [("k_a", [10.0 * t for t in (1, 2, 3, 4, 1, 2)]), ("k_a_par", [10.0 * t for t in (1, 2, 3, 4, 1, 2)]),
                    ("k_b", [1.0, 2.0, 3.0, 4.0, 1.0, 2.0]), ("k_c", [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]),
                    ("k_d", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]:
        out = np.zeros(6)
        lib[k](0, 6, out.ctypes.data)
        np.testing.assert_array_equal(out, want, err_msg=k)


_WARN_AT_FORK = [False]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _WARN_AT_FORK[0] and warnings.warn("fork in a threaded process", RuntimeWarning))


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="compiles in forked processes")
def test_a_module_compiled_in_parts_links_into_one_library(monkeypatch):
    """A module split into three parts, two compiled in forked children,
    links into one library that runs every kernel (its key's symbol with
    the first part); a warning a fork hook raises (jax's does, as python
    3.12 does for a process with threads) does not reach the user."""
    from codegen import llvm as llvm_mod
    monkeypatch.setattr(llvm_mod, "PART_LINES", 1)
    monkeypatch.setenv("SHAPEJIT_COMPILE_JOBS", "3")
    before = dict(llvm_mod.EVENTS)
    _WARN_AT_FORK[0] = True  # (as jax's own fork hook does once it runs)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            art = compile_ir(shared_ir(), SHARED, key_symbol="sj_key_" + "5a" * 8)
    finally:
        _WARN_AT_FORK[0] = False
    assert not seen, [str(w.message) for w in seen]
    assert len(art.objects) == 3
    assert llvm_mod.EVENTS["forked"] == before["forked"] + 2
    assert llvm_mod.EVENTS["recompiled"] == before["recompiled"]
    back = Artifact.from_bytes(art.to_bytes())
    assert back == art
    _check_shared(load(back))
    monkeypatch.setenv("SHAPEJIT_COMPILE_JOBS", "1")
    whole = compile_ir(shared_ir(), SHARED)
    assert len(whole.objects) == 1
    _check_shared(load(whole))


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="compiles in forked processes")
def test_a_part_is_collected_from_a_pipe_beyond_file_1024(monkeypatch):
    """A program with over a thousand files open (a server's sockets) gets
    its child's pipe above 1024, beyond select()'s reach: the parts still
    come back from the children."""
    import resource

    from codegen import llvm as llvm_mod
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if max(soft, hard) < 1200:
        pytest.skip("fewer than 1200 files may be open")
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    monkeypatch.setattr(llvm_mod, "PART_LINES", 1)
    monkeypatch.setenv("SHAPEJIT_COMPILE_JOBS", "2")
    held = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY))
        before = dict(llvm_mod.EVENTS)
        art = compile_ir(shared_ir(), SHARED)
    finally:
        for fd in held:
            os.close(fd)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(art.objects) == 2
    assert llvm_mod.EVENTS["forked"] == before["forked"] + 1
    assert llvm_mod.EVENTS["recompiled"] == before["recompiled"]
    _check_shared(load(art))


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="compiles in forked processes")
@pytest.mark.parametrize("how", ["raises", "dies", "hangs"])
def test_a_part_whose_child_fails_is_compiled_here(monkeypatch, how):
    from codegen import llvm as llvm_mod
    monkeypatch.setattr(llvm_mod, "PART_LINES", 1)
    monkeypatch.setattr(llvm_mod, "CHILD_TIMEOUT", 2.0)
    monkeypatch.setenv("SHAPEJIT_COMPILE_JOBS", "2")
    me, compile_part, pids = os.getpid(), llvm_mod._compile_part, []

    def failing(*args, **kw):
        if os.getpid() != me:
            pids.append(os.getpid())
            if how == "raises":
                raise RuntimeError("injected")
            if how == "dies":
                os._exit(3)
            import time
            time.sleep(60)
        return compile_part(*args, **kw)
    monkeypatch.setattr(llvm_mod, "_compile_part", failing)
    end, ended = llvm_mod._end, []
    monkeypatch.setattr(llvm_mod, "_end", lambda pid, r: (ended.append(pid), end(pid, r)))
    before = dict(llvm_mod.EVENTS)
    art = compile_ir(shared_ir(), SHARED)
    assert len(art.objects) == 2
    assert llvm_mod.EVENTS["recompiled"] == before["recompiled"] + 1
    _check_shared(load(art))
    assert len(ended) == 1
    with pytest.raises(ChildProcessError):  # (reaped: no zombie left)
        os.waitpid(ended[0], os.WNOHANG)


def test_parallel_for_kernel(axpb):
    a, b, out = arrays(rows=1001, n=67)
    for min_chunk in (1, 7, 400, 10_000):
        out[:] = 0
        threadpool.parallel_for(
            axpb["k_axpb"], 0, a.shape[0], ptrs(a, b, out) + (a.shape[1],), min_chunk
        )
        np.testing.assert_array_equal(out, a + 2 * b)
    out[:] = 0
    threadpool.parallel_for(axpb["k_axpb"], 100, 900, ptrs(a, b, out) + (67,), 1)
    np.testing.assert_array_equal(out[100:900], (a + 2 * b)[100:900])
    assert not out[:100].any() and not out[900:].any()


def test_load_from_many_threads(axpb_artifact):
    results = []

    def worker(seed):
        loaded = load(axpb_artifact)
        a, b, out = arrays(rows=50, n=33, seed=seed)
        threadpool.parallel_for(loaded["k_axpb"], 0, 50, ptrs(a, b, out) + (33,))
        results.append(np.array_equal(out, a + 2 * b))

    run_in_threads(worker, 6)
    assert results == [True] * 6


SUBPROCESS_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import llvmlite.binding as llvm

    def forbidden(*a, **k):
        raise AssertionError("LLVM compilation/optimization used while loading")

    llvm.parse_assembly = forbidden
    llvm.parse_bitcode = forbidden
    llvm.create_pass_builder = forbidden
    llvm.ModulePassManager.run = forbidden
    llvm.TargetMachine.emit_object = forbidden

    import numpy as np
    from codegen.artifact import Artifact
    from runtime.loader import load

    data = open(sys.argv[1], "rb").read()
    t0 = time.perf_counter()
    loaded = load(Artifact.from_bytes(data))
    t1 = time.perf_counter()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones_like(a)
    out = np.zeros_like(a)
    loaded["k_axpb"](0, 3, a.ctypes.data, b.ctypes.data, out.ctypes.data, 4)
    assert (out == a + 2 * b).all()
    assert "codegen.llvm" not in sys.modules
    print(f"LOAD_MS {(t1 - t0) * 1e3:.3f}")
    """
)


def test_load_in_fresh_subprocess(axpb_artifact, tmp_path):
    path = tmp_path / "axpb.artifact"
    path.write_bytes(axpb_artifact.to_bytes())
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, SHAPEJIT_DUMP_LLVM="")
    proc = subprocess.run(
        [sys.executable, "-c", SUBPROCESS_SCRIPT, str(path)],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"LOAD_MS ([\d.]+)", proc.stdout)  # (the time itself is a benchmark's business)


# ---------------------------------------------------------------------------
# thread pool


def test_parallel_for_covers_range_exactly_once():
    seen = []
    lock = threading.Lock()

    def fn(lo, hi, tag):
        assert tag == "t"
        with lock:
            seen.append((lo, hi))

    threadpool.parallel_for(fn, 3, 1003, ("t",), 10)
    seen.sort()
    assert seen[0][0] == 3 and seen[-1][1] == 1003
    assert all(hi0 == lo1 for (_, hi0), (lo1, _) in zip(seen, seen[1:]))
    assert all(hi - lo >= 10 for lo, hi in seen)
    assert len(seen) <= threadpool.num_threads() * threadpool.CHUNKS_PER_THREAD


def test_parallel_for_tiny_range_runs_inline():
    calls = []
    threadpool.parallel_for(lambda lo, hi: calls.append((lo, hi, threading.get_ident())), 0, 5, (), 3)
    assert calls == [(0, 5, threading.get_ident())]
    threadpool.parallel_for(lambda lo, hi: calls.append(1), 4, 4)  # empty
    assert len(calls) == 1


def test_parallel_for_reraises():
    def fn(lo, hi):
        if lo <= 50 < hi:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        threadpool.parallel_for(fn, 0, 100, (), 1)
    # the pool is still usable afterwards
    hits = []
    threadpool.parallel_for(lambda lo, hi: hits.append(hi - lo), 0, 100, (), 1)
    assert sum(hits) == 100


@pytest.fixture(params=["spin", "sleep"])
def wait_mode(request):
    """Workers and callers that spin-wait natively between jobs (what the jit
    installs) or only sleep on locks."""
    from jit.compile import library_function
    from codegen.parallel import SPIN_SYMBOL
    before = threadpool._spin_wait
    threadpool.set_spin_wait(library_function(SPIN_SYMBOL) if request.param == "spin" else None)
    yield request.param
    threadpool.set_spin_wait(before)


def test_parallel_for_from_several_threads_and_nested(axpb, wait_mode):
    def caller(seed):
        a, b, out = arrays(rows=300, n=40, seed=seed)
        for _ in range(20):
            out[:] = 0
            threadpool.parallel_for(axpb["k_axpb"], 0, 300, ptrs(a, b, out) + (40,))
            assert np.array_equal(out, a + 2 * b)

    # nested parallel_for inside a parallel_for must not deadlock
    threadpool.parallel_for(lambda lo, hi: [caller(s) for s in range(lo, hi)], 0, 4)
    run_in_threads(caller, 4, timeout=30)


