"""Prometheus metrics of every jitted function (prefix `shapejit_`).

    import jit.metrics
    jit.metrics.serve(9100)                  # /metrics on 127.0.0.1:9100
    app = jit.metrics.wsgi_app()             # or mount it in a WSGI server
    jit.metrics.register(my_registry)        # or add shapejit to your registry
"""
from runtime.metrics import register, serve, wsgi_app

__all__ = ["serve", "wsgi_app", "register"]
