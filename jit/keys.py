"""The full key of a call.  In: a JitFunction's keying state (the paths of
the held arrays and of the other values its traces read) and one call's
leaves; out: the call's specialization key (jit/signature.py) extended by the
held arrays' dtypes, shapes and layouts and the tokens of those values
(jit/held.py), and the held arrays, passed after the runtime inputs.  A trace
that reaches more of them rekeys the function; an int argument, or a held
int (`self.step`), whose value changed becomes a symbol (automatic dynamic):
a held one is keyed by its type, its value bound by the guards."""
from __future__ import annotations

from jit.entries import KeyState
from jit.errors import warn
from jit.held import MAX_ITEMS, ValueKeys, changed_number, fetch_all, key_of, read_as_value
from jit.signature import number_array
from jit.trace import TraceResult


def extended_key(jf, key, leaves):
    """(key with the held arrays' part and the tokens of the values traces
    read, the held arrays, the shapes the guards take of the held ints that
    are symbols -- `(value,)` each, after the arguments' arrays' --), or
    (None, None, ()) when a held path no longer reaches an array.  On the
    hot path: the values are read once for the key and the symbols."""
    tokens, objs = jf._values.read(leaves)
    ints = tuple([(objs[k],) for k in jf._values.int_at]) if jf._held_ints else ()
    if not jf._held_paths:
        return key + (tokens,), [], ints
    held = fetch_all(jf._held_paths, jf.fn, leaves, jf._held_floats)
    if held is None:
        return None, None, ()
    return key + (key_of(held), tokens), held, ints


def full_key(jf, key, leaves):
    """(the full key, the held arrays, the held ints' shapes) for this call;
    a path that no longer reaches an array is dropped (traces find them)."""
    if not (jf._held_paths or jf._value_paths):
        return key, [], ()
    full, held, ints = extended_key(jf, key, leaves)
    if full is None:
        jf._held_paths = []
        full, held, ints = extended_key(jf, key, leaves)
    return full, held, ints


def held_numbers_to_inputs(jf, leaves) -> list:
    """The held ints and floats the traces read whose value differs now from
    the last trace's, from now on keyed by their type (torch's automatic
    dynamic, as an int or float argument's; dynamic=False: none): an int a
    symbol bound by the guards (extended_key), a float a runtime scalar
    fetched with the held arrays (an lr schedule on `self`).  -> their paths."""
    if jf.dynamic is False:
        return []
    ints, floats = [], []
    for p, t in zip(jf._value_paths, jf._values.tokens(leaves)):
        kind = changed_number(jf._last_values.get(p), t)
        if kind is not None and p not in jf._held_ints and p not in jf._held_floats and read_as_value(p):
            (ints if kind is int else floats).append(p)
    if ints or floats:
        jf._held_ints = jf._held_ints + ints
        jf._held_floats = jf._held_floats + floats
        jf._held_paths = jf._held_paths + floats
        jf._values = ValueKeys(jf._value_paths, jf.fn, jf._held_ints, jf._held_floats)
    return ints + floats


def rekey(jf, state: KeyState, full, key, leaves, base_runtime, paths, values=()):
    """After a trace (or a saved entry) reached more held arrays, or
    read more values, than were known: key them too.  -> (state, full
    key, runtime inputs)."""
    new_values = [p for p in values if p not in jf._value_paths]
    if len(paths) <= len(jf._held_paths) and not new_values:
        return state, full, base_runtime + full_key(jf, key, leaves)[1]
    if len(paths) > len(jf._held_paths):
        jf._held_paths = list(paths)
    jf._value_paths = jf._value_paths + new_values
    jf._values = ValueKeys(jf._value_paths, jf.fn, jf._held_ints, jf._held_floats)
    if not state.entries:
        del jf._keys[full]
    full, held, _ = full_key(jf, key, leaves)
    new = jf._keys.setdefault(full, state)
    new.signature = state.signature
    return new, full, base_runtime + held


def note_values(jf, tr: TraceResult, leaves) -> None:
    """Remember the values the traces read (a later change names them
    as the reason of the retrace); warn once of those no token describes."""
    jf._last_values = dict(zip(jf._value_paths, jf._values.tokens(leaves)))
    jf._changed += [p for p in tr.changed if p not in jf._changed]
    new = [p for p in tr.unguarded if p not in jf._unguarded]
    if new:
        jf._unguarded += new
        warn(f"shapejit: {jf.__qualname__} reads {', '.join(new)}, which it cannot key on (an object "
             f"of a library's class, a container nested too deep, or one of more than {MAX_ITEMS} values "
             f"not read item by item): a change to it after this trace is not seen")


def changed_values(jf, leaves) -> list[str]:
    """The values the traces read that differ now from the last trace's."""
    return [str(p) for p, t in zip(jf._value_paths, jf._values.tokens(leaves))
            if jf._last_values.get(p, t) != t]


def changed_ints(jf, key) -> frozenset:
    """Leaf indices of the int arguments whose value differs from the one
    an earlier call of the same argument structure passed there (torch's
    automatic dynamic; dynamic=False: none)."""
    if jf.dynamic is False:
        return frozenset()
    out = set()
    for other in jf._keys:
        if len(other) == len(key) and other[0] == key[0]:
            out.update(k - 1 for k in range(1, len(key))
                       if _is_int_key(key[k]) and _is_int_key(other[k]) and other[k] != key[k])
    return frozenset(out)


def changed_lists(jf, bound: tuple) -> frozenset:
    """The arguments that are lists of numbers of another length than the
    first call that passed one there (a length that changes: the list is
    data, as an int that changes is a symbol; dynamic=False: none)."""
    if jf.dynamic is False or "type" in getattr(getattr(jf.fn, "__code__", None), "co_names", ("type",)):
        return frozenset()  # (a function that asks type() of a value would see the data's own: lists stay lists)
    out = set()
    for k, x in enumerate(bound):
        if type(x) is list and k not in jf._data_args and k not in jf._not_data \
                and number_array(x) is not None and jf._list_lens.setdefault(k, len(x)) != len(x):
            out.add(k)
    return frozenset(out)


def _is_int_key(k) -> bool:
    return type(k) is tuple and len(k) == 2 and k[0] is int
