"""Faults, their targets and triggers, and the interpreter that injects and heals them."""
