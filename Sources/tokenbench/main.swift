// Benchmarks: see `make bench` (issue 6). Placeholder until the benchmark lands.
print("tokenbench: not implemented yet")
