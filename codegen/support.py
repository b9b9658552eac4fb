"""Native helpers of the runtime, compiled like any kernel: a spin-wait that
lets a thread-pool worker see new work within a microsecond of it being
posted, instead of sleeping between two kernels of one call (waking a
sleeping thread, on an idle virtual CPU, takes tens of microseconds here:
as long as a small kernel itself).

`void sj_spin_wait(i64 seen, i64 rounds, i64 cell)`: returns once the i64 at
address `cell` differs from `seen`, or after `rounds` pause instructions.
The kernel ABI (start, stop, ints...), so it is called like any kernel, and
without the GIL.
"""
from __future__ import annotations

from llvmlite import ir

from codegen.llvm import I64, host_target

SPIN_SYMBOL = "sj_spin_wait"
SPIN_ARGS = (0, 1, 0)  # arrays, ints (the cell's address), floats


def spin_module() -> str:
    module = ir.Module(name="shapejit_support")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64, I64]), SPIN_SYMBOL)
    seen, rounds, cell = fn.args
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    wait = fn.append_basic_block("wait")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    ptr = b.inttoptr(cell, I64.as_pointer())
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    value = b.load_atomic(ptr, "acquire", 8)
    b.cbranch(b.icmp_signed("!=", value, seen), done, wait)
    b.position_at_end(wait)
    if host_target().triple.startswith(("x86_64", "i686", "i386")):
        b.call(ir.Function(module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause"), [])
    i_next = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(i_next, wait)
    b.cbranch(b.icmp_signed("<", i_next, rounds), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return str(module)
