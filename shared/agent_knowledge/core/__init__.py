"""The bottom layer every other package may import, and which imports none of them: per-container
state, the clock, logging and metrics, the small thread pool (docs/DESIGN.md §11)."""
