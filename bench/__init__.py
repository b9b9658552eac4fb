"""shapejit benchmark: ``python -m bench [--quick] [--only W,..] [--out FILE.md]``.

Modules: ``workloads`` (numpy reference functions and inputs, ``WORKLOADS``),
``peers`` (one class per compared implementation, lazily imported),
``harness`` (timing), ``suite`` (the measurements), ``coldstart``
(fresh-process compile measurements), ``report`` (markdown).
"""
