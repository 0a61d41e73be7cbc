"""Turns and runs: a turn's knowledge context (inline or on demand) and run completion."""
