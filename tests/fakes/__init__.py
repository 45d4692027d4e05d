"""Fakes of outside services that tests run for real on loopback."""
