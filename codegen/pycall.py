"""Kernels callable from Python without ctypes: for a kernel entry `k`
whose array arguments are numpy array objects (the jit's kernels and GEMMs;
codegen/parallel.py `parallel_entries(..., python=True)`), a CPython
METH_FASTCALL function `<k>_py`.

    PyObject *k_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs)

takes k's arguments in k's order (start, stop, arrays..., ints..., floats...;
a `_par` entry's chunk and pool are ints), converts them, runs `k` with the
GIL released and returns None.  The runtime makes a builtin function of it
(runtime/native.py): a call costs ~0.1 us where a ctypes call costs ~2.6 us.
Arrays go through as the object pointers (the kernels read the numpy array
struct themselves).  A wrong argument count raises TypeError, an
int or float argument that does not convert raises as PyLong_AsLongLong or
PyFloat_AsDouble do (TypeError, OverflowError).

The C-API functions are declarations; the loader resolves them against the
running process.  The entry never touches a reference count itself."""
from __future__ import annotations

from llvmlite import ir

from codegen.llvm import I64

I8, I32 = ir.IntType(8), ir.IntType(32)
F64 = ir.DoubleType()
OBJ = I8.as_pointer()  # PyObject*

PY_SUFFIX = "_py"

# the C-API functions an entry calls
_CAPI = {
    "PyErr_BadArgument": ir.FunctionType(I32, []),
    "PyErr_Occurred": ir.FunctionType(OBJ, []),
    "PyLong_AsLongLong": ir.FunctionType(I64, [OBJ]),
    "PyFloat_AsDouble": ir.FunctionType(F64, [OBJ]),
    "PyEval_SaveThread": ir.FunctionType(OBJ, []),
    "PyEval_RestoreThread": ir.FunctionType(ir.VoidType(), [OBJ]),
    "Py_BuildValue": ir.FunctionType(OBJ, [OBJ], var_arg=True),  # ("" -> a new reference to None)
}


def py_symbol(symbol: str) -> str:
    """A kernel entry's Python entry."""
    return symbol + PY_SUFFIX


def _capi(module: ir.Module, name: str) -> ir.Function:
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, _CAPI[name], name)


def _none_format(module: ir.Module) -> ir.GlobalVariable:
    """The C string "", Py_BuildValue's format for a new reference to None."""
    name = "sj_py_none_format"
    if name not in module.globals:
        g = ir.GlobalVariable(module, ir.ArrayType(I8, 1), name)
        g.initializer = ir.Constant(ir.ArrayType(I8, 1), bytearray(b"\0"))
        g.global_constant = True
        g.linkage = "internal"
    return module.globals[name]


def python_entry(module: ir.Module, fn: ir.Function, n_arrays: int, n_ints: int, n_floats: int) -> ir.Function:
    """Add `<fn>_py` (module docstring) for kernel entry `fn` of signature
    void(i64, i64, arrays..., i64 * n_ints, double * n_floats)."""
    entry = ir.Function(module, ir.FunctionType(OBJ, [OBJ, OBJ.as_pointer(), I64]), py_symbol(fn.name))
    _, args, nargs = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    fail = entry.append_basic_block("fail")
    n = 2 + n_arrays + n_ints + n_floats

    with b.if_then(b.icmp_signed("!=", nargs, ir.Constant(I64, n)), likely=False):
        b.call(_capi(module, "PyErr_BadArgument"), [])
        b.branch(fail)

    def converted(i: int, convert: str):
        """args[i] through `convert`; to `fail` when it returned -1 with an error set."""
        v = b.call(_capi(module, convert), [b.load(b.gep(args, [ir.Constant(I64, i)]))])
        minus_one = (b.icmp_signed("==", v, ir.Constant(v.type, -1)) if isinstance(v.type, ir.IntType)
                     else b.fcmp_ordered("==", v, ir.Constant(v.type, -1.0)))
        with b.if_then(minus_one, likely=False):
            raised = b.icmp_unsigned("!=", b.call(_capi(module, "PyErr_Occurred"), []), ir.Constant(OBJ, None))
            with b.if_then(raised, likely=False):
                b.branch(fail)
        return v

    values = []
    for i in range(n):
        if 2 <= i < 2 + n_arrays:  # the array object itself
            p = fn.args[i].type
            obj = b.load(b.gep(args, [ir.Constant(I64, i)]))
            values.append(obj if p == OBJ else b.bitcast(obj, p))
        elif i < 2 + n_arrays + n_ints:  # start, stop and the ints
            values.append(converted(i, "PyLong_AsLongLong"))
        else:
            values.append(converted(i, "PyFloat_AsDouble"))
    state = b.call(_capi(module, "PyEval_SaveThread"), [])  # kernels run long; callers call from many threads
    b.call(fn, values)
    b.call(_capi(module, "PyEval_RestoreThread"), [state])
    b.ret(b.call(_capi(module, "Py_BuildValue"), [b.bitcast(_none_format(module), OBJ)]))

    b.position_at_end(fail)
    b.ret(ir.Constant(OBJ, None))
    return entry
