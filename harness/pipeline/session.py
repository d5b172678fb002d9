"""Starting Spark for the pipeline: checks first, then a session whose noise goes to a log file.

The JVM inherits the Python process's stdout and stderr, and prints to them before log4j is even
configured (module warnings, the log4j profile banner). So while the gateway starts, file
descriptors 1 and 2 point at `<out>/spark.log`; the JVM keeps them, and everything it (and the
Python workers it spawns) prints lands there. log4j2 is pointed at the same file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The project's top-level packages; executors need them to unpickle the task functions and to run
# the checkers.
PACKAGES = ("contracts", "harness", "checkers", "workloads", "nemesis", "reference_node")
PROJECT_ROOT = Path(__file__).resolve().parents[2]

LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


class EnvironmentProblem(Exception):
    """Spark cannot run here; the message says what is missing and how to get it."""


def java_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise EnvironmentProblem(f"cannot tell the version of {java}: {out.stderr.strip()!r}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" is Java 8


def check_environment() -> None:
    """PySpark importable, and a Java it supports (Spark 4 needs 17+, Spark 3.5 needs 8+)."""
    try:
        import pyspark
    except ImportError:
        raise EnvironmentProblem(
            "PySpark is not installed: pip install 'kraft-jepsen[spark]' (or pip install pyspark)"
        ) from None
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no `java` on PATH"
        raise EnvironmentProblem(f"Java is needed by Spark and was not found ({where}); install a "
                                 "JDK (e.g. apt-get install openjdk-17-jre-headless) or set "
                                 "JAVA_HOME")
    needed = 17 if int(pyspark.__version__.split(".")[0]) >= 4 else 8
    have = java_version(java)
    if have < needed:
        raise EnvironmentProblem(f"PySpark {pyspark.__version__} needs Java {needed}+, but "
                                 f"{java} is Java {have}; install a newer JDK or set JAVA_HOME")


@contextmanager
def _fds_to(log: Path) -> Iterator[None]:
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def code_zip(out: Path) -> Path:
    """The project's packages as a zip for executors that do not have the project installed."""
    path = out / "kraft-code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for package in PACKAGES:
            for file in sorted((PROJECT_ROOT / package).rglob("*.py")):
                z.write(file, file.relative_to(PROJECT_ROOT).as_posix())
    return path


def start(master: str, out: Path, driver_memory: str = "2g",
          conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession on `master`, quiet, loopback-bound, using this Python on every executor."""
    from pyspark.sql import SparkSession

    out.mkdir(parents=True, exist_ok=True)
    log = out / "spark.log"
    log4j = out / "log4j2.properties"
    log4j.write_text(LOG4J2.format(log=log))
    # Python workers must run this interpreter, where the project (and its checkers) is installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # PySpark's own complaints about the pandas version are not the user's business.
    warnings.filterwarnings("ignore", module=r"pyspark\.")
    warnings.filterwarnings("ignore", message=".*PySpark does not yet fully support pandas.*")
    settings = {
        "spark.app.name": "kraft analyze",
        "spark.master": master,
        "spark.driver.memory": driver_memory,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.shuffle.partitions": "16",
        # The histories are thousands of files named one by one: listing them is a stat each, far
        # cheaper on the driver than as a job of one Spark task per file (the default above 32).
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
        "spark.sql.session.timeZone": "UTC",
        # Arrow (pyarrow) is optional; without it PySpark warns on every toPandas.
        "spark.sql.execution.arrow.pyspark.enabled": "false",
        **(conf or {}),
    }
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _fds_to(log):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not is_local(master):
        spark.sparkContext.addPyFile(str(code_zip(out)))
    return spark
