"""The built-in catalogs: allocators, workloads, suites, settings, hardening.

Data, and the scripts the application workloads run (apps/churn.py, and its Lua and
Ruby twins): nothing here is imported.
"""
