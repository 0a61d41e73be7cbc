"""Reliability drills and long runs: storage faults with real timings, load, long fuzzing."""
