"""Code generation: a Plan's fused kernels go in; LLVM IR over symbolic
extents, optimized for the host CPU, comes out as an Artifact (object code +
kernel ABIs as plain data)."""
