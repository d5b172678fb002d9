"""The `kraft` subcommands of the harness, one module each with `main(argv) -> int`.

`harness/cli.py` dispatches to them (and to the node's own commands in `reference_node/`); a
command imports its heavy dependencies lazily, so `kraft --help` stays fast.
"""
