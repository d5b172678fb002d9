"""Targets written outside the harness, as a user writes their own (docs/your-own-target.md).

Importable from the repository's root as `examples.<module>`, and so loadable there as
`kraft test --target examples.toy:ToyTarget`; not part of the installed packages.
"""
