"""The protocol calls — capabilities, search, read — their byte budgets, hints and body windows.

Plain package: import the submodule you need (docs/DESIGN.md §11)."""
