"""Speed benchmarks: ratios against a baseline run side by side in one process."""
