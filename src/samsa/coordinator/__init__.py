"""Coordinators: consumer groups (and, later, transactions)."""
