"""The symbolic-shape IR: traced numpy calls go in as ops with symbolic
shapes; a verified Graph, its ShapeEnv and compiled guards come out."""
