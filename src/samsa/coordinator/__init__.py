"""Coordinators: consumer groups and transactions, each kept in an internal topic."""
