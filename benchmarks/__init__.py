"""Benchmarks of loadwise: latency, memory, soak and placement (benchmarks/placement/)."""
