"""The `kraft` command: one console script, one subcommand per job (see docs/architecture.md).

Each subcommand lives in its own module and exposes `main(argv: list[str]) -> int`; this file only
dispatches, so that the parts can grow without touching each other. A subcommand imports its heavy
dependencies (docker, pyspark, matplotlib) lazily, so `kraft --help` stays fast and a missing
optional dependency only breaks the command that needs it. Whatever the subcommand, a crash (an
unexpected exception) prints its traceback and exits 3, never 1 (INVALID to `kraft test`).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import sys
import traceback

EXIT_USAGE = 64
# A crash (an exception no subcommand expected): never 1, which `kraft test` and `kraft check`
# give for INVALID, so that a script can tell a broken tool from an anomaly found.
EXIT_CRASH = 3

# name -> (module exposing main(argv) -> int, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "node": ("reference_node.cli", "run a reference KRaft node, or `node format` its directory"),
    "quorum": ("reference_node.quorum_cli", "describe the quorum, like kafka-metadata-quorum.sh"),
    "cluster": ("reference_node.brokers_cli", "`cluster brokers`: the registered brokers and "
                "their state"),
    "simulate": ("reference_node.sim.cli", "deterministic simulation of Raft cores"),
    "test": ("harness.commands.test", "one test run: deploy, run workload and nemesis, check, store"),
    "check": ("harness.commands.check", "re-run the checkers on a stored run or history"),
    "images": ("harness.commands.images", "build the node images for the docker backend"),
    "campaign": ("harness.commands.campaign", "run the pytest campaign suite with Allure results"),
    "compare": ("harness.commands.compare", "the same matrix against several targets, side by side"),
    "analyze": ("harness.commands.analyze", "the Spark pipeline over many runs"),
    "report": ("harness.commands.report", "generate the Allure report"),
    "serve": ("harness.commands.serve", "browse stored runs in a web browser (read-only, 127.0.0.1)"),
    "clean": ("harness.commands.clean", "remove every container, network and process a run left"),
    "faultfs": ("nemesis.faultfs.cli", "the fault-injecting filesystem under a node's data "
                "(disk nemeses)"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: kraft COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "`kraft COMMAND --help` describes a command; `kraft --version` names this build."]
    return "\n".join(lines)


def skip_test_only_imports() -> None:
    """kio imports hypothesis whenever it is installed, only to register test strategies for its
    types; with it come pytest and trio. No kraft command uses them, yet every node process and
    every `kraft check` paid for them at start: about 0.5 s and 19 MB of RSS (bench/README). A
    module set to None in sys.modules makes its import raise ImportError, which kio expects.
    Only for a process that kraft starts and owns: an in-process caller (pytest) passes `argv`
    and keeps hypothesis."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def _version() -> str:
    try:
        return importlib.metadata.version("kraft-jepsen")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout never installed
        return "unknown (not installed: pip install -e .)"


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process's own command line (the console script, `python -m harness.cli`)
        skip_test_only_imports()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else EXIT_USAGE
    if args[0] in ("-V", "--version"):
        print(f"kraft {_version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, list(COMMANDS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        print(f"kraft: unknown command {name!r}{hint}; one of: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return EXIT_USAGE
    module_name = COMMANDS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"kraft {name}: not available in this build ({module_name} is missing)",
                  file=sys.stderr)
            return EXIT_USAGE
        raise
    try:
        code: int = module.main(rest)
    except Exception:
        traceback.print_exc()
        print(f"kraft {name}: crashed (the traceback above); exit {EXIT_CRASH}", file=sys.stderr)
        return EXIT_CRASH
    return code


if __name__ == "__main__":
    sys.exit(main())
