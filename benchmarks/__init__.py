"""Side-by-side benchmarks: each file compares tfpipe with a hand-written baseline in one run."""
