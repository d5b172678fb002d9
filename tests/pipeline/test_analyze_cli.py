"""`kraft analyze` refusing bad input and a missing environment, before any Spark starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import cli
from harness.commands import analyze as analyze_cli
from harness.pipeline import session


def test_missing_directory_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["analyze", str(tmp_path / "nope")]) == 64
    assert "is not a directory" in capsys.readouterr().err


def test_bad_usage(capsys: pytest.CaptureFixture) -> None:
    assert analyze_cli.main([]) == 64
    assert analyze_cli.main(["--help"]) == 0
    assert "--master" in capsys.readouterr().out


def test_missing_java_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert analyze_cli.main([str(tmp_path)]) == 64
    err = capsys.readouterr().err
    assert "Java" in err and "JAVA_HOME" in err


def test_missing_pyspark_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # makes `import pyspark` fail
    assert analyze_cli.main([str(tmp_path)]) == 64
    assert "pip install" in capsys.readouterr().err


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "java_version", lambda java: 11)
    with pytest.raises(session.EnvironmentProblem, match="needs Java 17"):
        session.check_environment()


def test_spark_failure_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Py4JJavaError: the master is gone")

    monkeypatch.setattr(session, "start", broken)
    out = tmp_path / "out"
    out.mkdir()
    assert analyze_cli.main([str(tmp_path), "--out", str(out), "--no-recheck"]) == 3
    assert "Spark failed: Py4JJavaError" in capsys.readouterr().err
    assert "RuntimeError" in (out / "spark.log").read_text()
