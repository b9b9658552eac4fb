"""A JitFunction's saved traces, shared with other processes through the
compile cache (jit/persist.py holds the record format).  In: the function
and a call's key; out: the record key of that specialization, an entry
loaded from another process's record whose guards accept the call (linked,
ready to run: no trace, passes, codegen or sympy), and a new entry appended
to the record; why a trace is not saved is kept for explain()."""
from __future__ import annotations

from jit import lift, persist
from jit.compile import build_saved, plan_switches
from jit.entries import CompiledEntry, KeyState
from jit.fingerprint import Unstable, function_fingerprint, stable_text
from jit.held import ValueKeys, by_type, fetch_all, key_of
from jit.signature import Signature
from jit.trace import TraceResult
from runtime.cache import default_cache
from runtime.metrics import logger_for


def record_key(jf, key) -> str | None:
    """The disk record of saved traces for this specialization, or None
    when traces are not saved (reference back end, no disk cache, or a
    function whose globals have no process-independent identity)."""
    if jf.backend != "llvm" or not persist.enabled():
        return None
    if not default_cache().on_disk:
        return None
    # on every miss (a few ms): a global reassigned since the last trace is a new key
    fingerprint, why = function_fingerprint(jf.fn)
    jf._saving = f"traces not saved: {why}" if why else None
    if fingerprint is None:
        return None
    try:
        options = stable_text((jf.dynamic, sorted(jf.dims.items()), jf.constraints,
                               sorted(jf.static_argnames), jf.backend, plan_switches()))
    except Unstable:
        return None
    return persist.key_for(fingerprint, key, options)


def load_entry(jf, state: KeyState, record: str, shapes, leaves) -> tuple[CompiledEntry, tuple] | None:
    """(entry, dims) from another process's saved traces whose guards
    accept these shapes (and whose held arrays have the shapes it was
    built for), or None."""
    if state.saved is None:
        state.saved, state.saved_level = persist.load(default_cache(), record)
    m = jf.metrics
    for i, s in enumerate(state.saved):
        dims = s.guard_set.check(shapes)
        if dims is None:
            continue
        if any(p in jf._held_ints or p in jf._held_floats for p in s.guarded):
            continue  # (traced for one value of a held int that is a symbol now: keyed so, it would serve every value)
        if jf._held_paths and list(s.held[:len(jf._held_paths)]) != jf._held_paths:
            continue  # (it takes fewer or other held arrays than this function's calls hand its entries: traced)
        if s.held:
            held = fetch_all(s.held, jf.fn, leaves)
            if held is None or key_of(held) != s.held_key:
                continue
        if s.values and not persist.values_match(s.values, ValueKeys(s.guarded, jf.fn).tokens(leaves)):
            continue  # traced when a value it read was another
        del state.saved[i]
        b = build_saved(s.build)
        if b is None:  # its object code was evicted: trace and compile as usual
            return None
        scans = persist.scans_of(b.executable.portable)
        if scans:
            rw = lift.rewritten(jf.fn)
            if rw is None or not all(call.bind(jf, rw.sites) for call in scans):
                return None  # (a loop its function's source no longer gives back: trace as usual)
        for stage, sec in b.seconds.items():
            m.compile_seconds[stage].observe(sec)
        m.cache_hits[state.saved_level or "disk", "trace"] += 1
        lg = logger_for("compile")
        if lg:
            lg.info("%s: loaded a saved trace (%s) in %.1f ms", jf.__qualname__,
                    state.signature.describe(), b.seconds["load"] * 1e3)
        b.executable.pool.budget = jf.pool_bytes
        return CompiledEntry(s.guard_set, b.executable.run, s.out_treedef, b.executable, b, saved=s,
                             state=list(s.state) or None), dims
    return None


def save_entry(jf, record: str | None, tr: TraceResult, entry: CompiledEntry, held: list, sig: Signature) -> None:
    """Append the entry built from `tr` (with the held arrays of its call)
    to the record, unless traces are not saved (`record` None) or the build
    fell back to the reference back end."""
    if record is None or entry.build.plan is None:
        return
    if any(map(by_type, tr.guarded.values())):
        jf._saving = "trace not saved: held numbers keyed by their type are decided per process (jit/keys.py)"
        return
    held_key = key_of(held)
    why = persist.save(default_cache(), record,
                       lambda: persist.entry_of(tr, entry.guards, entry.build, held_key, entry.summary(), jf.fn),
                       jf.__qualname__, sig.describe())
    if why:
        jf._saving = f"trace not saved: {why}"
