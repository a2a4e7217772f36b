"""The built-in catalogs: allocators, workloads, suites, settings, hardening."""
