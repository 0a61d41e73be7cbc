"""Turns: server-side preparation of a run's frozen knowledge context, and run completion."""
