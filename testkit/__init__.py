"""Support for the project's tests and benchmarks (not used by `kraft` itself): starting a local
cluster of reference nodes, and seeded synthetic runs in the results layout."""
