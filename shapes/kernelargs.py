"""The arguments of a native kernel, as codegen declares them (codegen/abi.py
KernelABI, codegen/gemm.py, codegen/loops.py) and the runtime passes them
(runtime/kernelcall.py): one place for the contract both sides read.

An argument is (kind, what): ("array", value id) a numpy array object,
("int", expr) an int64 the runtime computes from the bound dims,
("intval", value id) a runtime integer or bool scalar passed exactly as
int64, ("float", value id) a float scalar as a double.  A few ints are not
dims: the runtime supplies them itself, below.  Last, the one fact the two
thread pools share (codegen/parallel.py's native pool, runtime/threadpool.py's
Python pool where there is no native one), and the one the GEMM kernel's
choice of path shares with the product dispatch (codegen/gemm.py,
runtime/dispatch.py)."""

INT_KINDS = ("int", "intval")  # the kinds passed as int64, in the ints' place of the ABI

# the calling thread's bounds-check error cell's address (a kernel compiled checked)
ERRCELL = ("int", "errcell")
# numpy's cblas_dgemv's address, 0 where there is none (a re-rolled loop's vector times a matrix)
GEMV = ("int", "gemv")
# a product's epilogue run in its store: the tile entry's address, and its packed arguments' (0, 0: none)
EPILOGUE, EPILOGUE_ARGS = ("int", "epilogue"), ("int", "epilogue_args")

# chunks of a job per thread, in either pool: a late (descheduled, slow to
# wake) thread leaves its share to the others, which take more chunks
CHUNKS_PER_THREAD = 4

# B's rows a multiple of this many bytes apart share the L1's sets: the GEMM
# kernel packs such a B where it would stream another (codegen/gemm.py), so
# the product dispatch tells such products apart (runtime/dispatch.py)
ALIAS_BYTES = 2048


def rows_alias(n: int, itemsize: int) -> bool:
    """Whether the rows of a C-contiguous B of n columns alias (ALIAS_BYTES)."""
    return n > 0 and (n * itemsize) % ALIAS_BYTES == 0
