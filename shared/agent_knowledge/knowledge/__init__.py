"""The three protocol calls — capabilities, search, read — and their byte budgets."""
