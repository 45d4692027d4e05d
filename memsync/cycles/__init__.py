"""Maintenance cycles: prune and insight turns through role models, landed by the gate."""
