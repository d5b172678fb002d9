"""`kraft serve`: what it lists, what it links, and that it never reads outside the results."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pages_runs import failing_run

from harness import serve
from harness.cli import main as kraft


def request(server: serve.RunsServer, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """A raw request: `path` goes on the wire exactly as given (no client-side normalising)."""
    connection = http.client.HTTPConnection(serve.HOST, server.server_address[1], timeout=10)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results directory with a failing run, a valid one, `latest`, an analysis page, and a
    secret beside it that a symlink inside points to."""
    tmp_path = tmp_path_factory.mktemp("serve")
    run = failing_run(tmp_path)
    assert kraft(["check", str(run)]) == 1
    assert (run / "plots" / "leaders.png").read_bytes()[:4] == b"\x89PNG"  # beside the other plots
    root = run.parent.parent
    valid = root / "other-test" / "20240602T080000.000000"
    valid.mkdir(parents=True)
    (valid / "test.json").write_text(json.dumps({"name": "other-test", "target": "reference",
                                                 "nemesis": ["kill", "pause"], "time_limit": 30}))
    (valid / "results.json").write_text(json.dumps({"valid": True, "checkers": {}, "anomaly_types": []}))
    (root / "latest").symlink_to(os.path.relpath(run, root))
    (root / "_analysis").mkdir()
    (root / "_analysis" / "summary.html").write_text("<html><body>summary</body></html>")
    (tmp_path / "secret.txt").write_text("root:x:0:0:do not serve me\n")
    (root / "escape").symlink_to(tmp_path)
    (root / "escape-file").symlink_to(tmp_path / "secret.txt")
    return root


@pytest.mark.parametrize("path", [
    "/../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/..%2f..%2f..%2fetc%2fpasswd",
    "/%2E%2E%2F%2E%2E%2Fsecret.txt",
    "/append-test/../../secret.txt",
    "/escape/secret.txt",
    "/escape-file",
    "/escape/",
    "/..\\..\\secret.txt",
    "/%00/etc/passwd",
    "/.hidden",
    "/%ff%fe",
])
def test_paths_out_of_the_results_directory_are_refused(served: Any, results_dir: Path, path: str) -> None:
    server = served(results_dir)
    status, _, body = request(server, path)
    assert status == 403, (path, status, body[:200])
    assert b"root:" not in body and b"do not serve me" not in body


def test_confine_keeps_links_that_stay_inside(results_dir: Path) -> None:
    assert serve.confine(results_dir, "/latest/test.json") == (
        results_dir / "append-test" / "20240601T120000.000000" / "test.json").resolve()
    assert serve.confine(results_dir, "/") == results_dir.resolve()
    assert serve.confine(results_dir, "/escape/secret.txt") is None


def test_only_get_and_head(served: Any, results_dir: Path) -> None:
    server = served(results_dir)
    for method in ("POST", "PUT", "DELETE"):
        assert request(server, "/latest/test.json", method)[0] == 501
    status, headers, body = request(server, "/latest/test.json", "HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    assert serve.HOST == "127.0.0.1" and server.server_address[0] == "127.0.0.1"


def test_index_lists_runs_newest_first_and_filters_by_verdict(served: Any, results_dir: Path) -> None:
    server = served(results_dir)
    status, headers, body = request(server, "/")
    page = body.decode()
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert page.index("other-test") < page.index("zombie-leader")  # 2024-06-02 before 2024-06-01
    assert "kill, pause" in page and "stale-read" in page and "30.0 s" in page and "6.2 s" in page
    assert "_analysis/summary.html" in page
    assert page.count("class='run'") == 2  # `latest` is not a second copy of the newest run
    invalid = request(server, "/?verdict=invalid")[2].decode()
    assert "zombie-leader" in invalid and "other-test" not in invalid
    assert "No runs here with this verdict" in request(server, "/?verdict=unknown")[2].decode()


def test_run_page_links_what_the_run_stored(served: Any, results_dir: Path) -> None:
    server = served(results_dir)
    status, headers, _ = request(server, "//append-test/20240601T120000.000000")
    assert status == 301 and headers["Location"] == "/append-test/20240601T120000.000000/"
    status, _, body = request(server, "/append-test/20240601T120000.000000/")
    page = body.decode()
    assert status == 200
    for href in ("timeline.html", "results.json", "history.jsonl", "test.json", "harness.log",
                 "nodes/n1/node.log", "nodes/n2/events.jsonl", "nodes/n3/final.json", "nodes/n1/"):
        assert f"href='{href}'" in page, href
        assert request(server, f"/append-test/20240601T120000.000000/{href}")[0] == 200, href
    assert "invalid" in page and "stale-read: 2" in page
    status, headers, body = request(server, "/latest/history.jsonl")
    assert status == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.count(b"\n") == len((results_dir / "latest" / "history.jsonl").read_text().splitlines())
    assert request(server, "/latest/nodes/n1/")[0] == 200
    assert request(server, "/latest/no-such-file")[0] == 404


def test_kraft_serve_refuses_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kraft(["serve", str(tmp_path / "nowhere")]) == 64
    assert "is not a directory" in capsys.readouterr().err
    assert kraft(["serve", "--help"]) == 0


def test_the_run_page_names_the_keys_a_search_left_undecided_beside_its_violation() -> None:
    from harness import serve

    searched = {"valid": False, "anomaly_counts": {"nonlinearizable": 1},
                "undecided": ["1", "'y'"], "undecided_keys": 2}
    assert "nonlinearizable: 1; undecided key(s): 1, &#x27;y&#x27;" in \
        serve._checkers({"checkers": {"linearizable": searched}})
