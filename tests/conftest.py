"""Shared pytest configuration. Fixtures live beside the tests that use them."""
