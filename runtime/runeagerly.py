"""Why a call leaves its executable: RunEagerly and its reasons.  The
generated function (or a step it runs) raises one, and the caller runs that
call in numpy; `reason` is the fallback metric's label."""


class RunEagerly(Exception):
    """This call cannot run on the executable (the caller runs it in numpy)."""
    reason = "eager"


class ShapeMismatch(RunEagerly):
    """An eager op's output did not have the size the trace relied on."""
    reason = "eager_size_changed"


class ScanMismatch(RunEagerly):
    """A compiled loop (a scan, jit/scan.py) ran otherwise than its trace: a
    trip gave a carried value another shape or dtype than it had before the
    loop, or no trip ran where the function reads the loop's variable."""
    reason = "scan_changed"


class BreakMismatch(RunEagerly):
    """A graph break's value decides otherwise than on the traced call: this
    entry does not serve the call (another entry, or a new trace, does)."""
    reason = "graph_break"


class DtypeMismatch(BreakMismatch):
    """An eager op's output has another dtype or rank than on the traced
    call (np.linalg.eig of a matrix whose eigenvalues are complex, where the
    trace's were real): as a graph break deciding otherwise, another entry,
    or a trace of this call, serves it."""


class RowsOfOtherLengths(BreakMismatch):
    """A scan whose trace stacked what its trips append met rows of other
    lengths (the last batch of a loop over batches): this entry serves no
    call again; the trace made for this call joins them (jit/scan.py)."""


class NoIntOfFloat(RunEagerly):
    """A Python float (or int) the compiled code converts to an integer type
    has no value of it (a NaN, an infinity, past the type: jit/tracer.py
    IntOfFloat): numpy runs the call, and raises or gives Python's int."""
    reason = "int_of_float"


class LoopAbort(RunEagerly):
    """A lifted loop met what Python or numpy raises or warns about (an
    index out of range, an overflow, a division by zero): numpy runs the
    call and does so."""
    reason = "lifted_loop"


class Aliased(RunEagerly):
    """An argument the function writes into shares memory with another
    argument: the functionalized graph would not see the write through it."""
    reason = "aliased_arguments"
