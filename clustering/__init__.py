"""Graph passes, partition and fusion: a traced Graph goes in; a Plan of
fused kernels and eager numpy steps, in execution order, comes out."""
from clustering.partition import Kernel, Plan, partition
from clustering.passes import PIPELINE, run_pipeline

__all__ = ["Kernel", "Plan", "partition", "PIPELINE", "run_pipeline"]
