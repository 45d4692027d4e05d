"""Benchmarks (`make bench`): medians and ratios against the raw tools, measured in one run."""
