"""How a kernel reaches the elements of the numpy arrays it is passed.

In: the array objects a kernel function receives (codegen/abi.py BoundArgs)
and the IR Values they hold.  Out: each array's data pointer, its element
strides read from the array object, and element addresses, loads and
stores at an element offset (a complex element a part at a time:
codegen/complexval.py).  In bounds-checked mode (SHAPEJIT_BOUNDS_CHECK)
every address is checked against the bytes the array owns: an access
outside sets the kernel's error cell and goes to element 0 instead.
"""
from __future__ import annotations

from llvmlite import ir

from codegen.abi import DATA_OFFSET, DIMS_OFFSET, I1, I64, MEMTYPE, STRIDES_OFFSET, array_field, from_memory, \
    to_memory
from codegen.complexval import CValue, part_type
from shapes.ir import Value


class Arrays:
    """The arrays of one kernel function: `objects` (value id -> its array
    object), `values` (value id -> its Value), `errcell` (the error cell,
    None when unchecked).  The data pointers (and, checked, the extents)
    are read where the builder stands, once."""

    def __init__(self, b: ir.IRBuilder, objects: dict, values: dict[int, Value], errcell=None):
        self.b, self.objects, self.values, self.errcell = b, objects, values, errcell
        self.data = {vid: self._data_ptr(vid) for vid in objects}
        self.extent = {vid: self._byte_extent(vid) for vid in objects} if errcell is not None else {}

    def _field(self, vid, offset: int, ty):
        return array_field(self.b, self.objects[vid], offset, ty)

    def _data_ptr(self, vid):
        v = self.values[vid]
        ty = part_type(v.dtype) if v.dtype.kind == "c" else MEMTYPE[v.dtype]
        return self._field(vid, DATA_OFFSET, ty.as_pointer())

    def _byte_extent(self, vid):
        """[lo, hi]: the byte offsets from the data pointer that the array owns
        (bounds-checked mode); empty arrays get lo > hi."""
        b = self.b
        v = self.values[vid]
        lo = hi = ir.Constant(I64, 0)
        empty = ir.Constant(I1, 0)
        dims = self._field(vid, DIMS_OFFSET, I64.as_pointer())
        strides = self._field(vid, STRIDES_OFFSET, I64.as_pointer())
        for k in range(v.ndim):
            d = b.load(b.gep(dims, [ir.Constant(I64, k)]))
            st = b.load(b.gep(strides, [ir.Constant(I64, k)]))
            empty = b.or_(empty, b.icmp_signed("<=", d, ir.Constant(I64, 0)))
            ext = b.mul(b.sub(d, ir.Constant(I64, 1)), st)
            neg = b.icmp_signed("<", ext, ir.Constant(I64, 0))
            lo = b.add(lo, b.select(neg, ext, ir.Constant(I64, 0)))
            hi = b.add(hi, b.select(neg, ir.Constant(I64, 0), ext))
        hi = b.select(empty, ir.Constant(I64, -1), hi)
        return lo, hi

    def stride(self, vid, axis):
        """Element stride of `vid` along its own axis, read from the array."""
        b = self.b
        v = self.values[vid]
        strides = self._field(vid, STRIDES_OFFSET, I64.as_pointer())
        s = b.load(b.gep(strides, [ir.Constant(I64, axis)]))
        return b.sdiv(s, ir.Constant(I64, v.dtype.itemsize), name=f"stride{vid}_{axis}")

    def addr(self, vid, off):
        """The element address; in checked mode an out-of-bounds offset sets
        the error cell and is redirected to element 0 (never touched: the
        runtime raises before using any result)."""
        b = self.b
        if self.errcell is not None:
            v = self.values[vid]
            lo, hi = self.extent[vid]
            byte = b.mul(off, ir.Constant(I64, v.dtype.itemsize))
            ok = b.and_(b.icmp_signed(">=", byte, lo), b.icmp_signed("<=", byte, hi))
            with b.if_then(b.not_(ok), likely=False):
                b.store(ir.Constant(I64, 1), self.errcell)
            off = b.select(ok, off, ir.Constant(I64, 0))
            ok_nonempty = b.icmp_signed("<=", lo, hi)
            with b.if_then(b.not_(ok_nonempty), likely=False):
                b.store(ir.Constant(I64, 1), self.errcell)
        if self.values[vid].dtype.kind == "c":  # (the real part's; the imaginary part follows it)
            off = b.mul(off, ir.Constant(I64, 2))
        return b.gep(self.data[vid], [off])

    def load(self, v: Value, off):
        """v's element at `off` (a bool as i1, a complex as its parts)."""
        b = self.b
        if v.dtype.kind == "c":
            p = self.addr(v.id, off)
            return CValue(b.load(p), b.load(b.gep(p, [ir.Constant(I64, 1)])))
        return from_memory(b, b.load(self.addr(v.id, off)), v.dtype)

    def store(self, v: Value, off, x):
        """x (a bool as i1, a complex as its parts) into v's element at `off`."""
        b = self.b
        if v.dtype.kind == "c":
            p = self.addr(v.id, off)
            b.store(x.re, p)
            b.store(x.im, b.gep(p, [ir.Constant(I64, 1)]))
            return
        b.store(to_memory(b, x, v.dtype), self.addr(v.id, off))
