"""Fault, crash, load, hostile-input and security tests (a package, so its
conftest never shadows the other directories' conftest modules)."""
