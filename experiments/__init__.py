"""Suites as Python: each declares its points; harness/ runs them."""
