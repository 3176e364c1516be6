"""Experiments: scripts that bring a fabric up (or use the in-process emulator), run hosts
and controller commands, and write CSVs and plots under ``results/``."""
