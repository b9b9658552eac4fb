"""The runtime: Artifacts and graphs go in; an Executable (ordered native
kernel calls and numpy steps) comes out, with the loader, the thread pool,
the buffer pool, the compile cache and the metrics."""
