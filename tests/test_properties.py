"""The `.properties` codec: Java's reading and escaping, and the node config the harness writes."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.backend import Backend
from harness.targets.reference import properties as node_properties
from reference_node.config import from_properties
from reference_node.properties import parse, render

# Characters each of which the format gives a meaning: separators, comment marks, the escape,
# blanks, line ends, and characters that only \uXXXX can carry in an ASCII file.
TRICKY = st.text(st.sampled_from("ab=:#! \\\t\n\r\f\x00\x7fé€😀u0"), max_size=12)
ANY = st.text(max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(TRICKY | ANY, TRICKY | ANY, max_size=6))
def test_what_render_writes_parse_reads_back(props: dict[str, str]) -> None:
    text = render(props)
    assert text.isascii()
    assert parse(text) == props


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab=:#! \\\t\n\r\fu0Dd8E") | st.characters(), max_size=40))
def test_any_text_parses_and_renders_to_the_same_entries(text: str) -> None:
    props = parse(text)
    assert parse(render(props)) == props


def test_render_escapes_as_java_properties_store() -> None:
    # What java.util.Properties.store(OutputStream) writes for the same entries.
    assert render({"a b": " c:d", "k#!": "=x\\y", "t": "\t\n\r\f"}) == (
        "a\\ b=\\ c\\:d\n" "k\\#\\!=\\=x\\\\y\n" "t=\\t\\n\\r\\f\n"
    )
    assert render({"café": "€ 😀", "x": "  two"}) == (
        "caf\\u00E9=\\u20AC \\uD83D\\uDE00\n" "x=\\  two\n"
    )


def test_parse_reads_as_java_properties_load() -> None:
    text = (
        "# comment\n! also comment\n  node.id = 3\nlisteners:CONTROLLER://h:1\n"
        "controller.quorum.voters 1@a:1,\\\n   2@b:2\nmetadata.log.dir=/d\\u0041\n"
        "cont=a\\\n#not a comment\nk\\ ey = = v \nempty\nsep\t:\t\tx\r\nlast=z\\"
    )
    assert parse(text) == {
        "node.id": "3",
        "listeners": "CONTROLLER://h:1",
        "controller.quorum.voters": "1@a:1,2@b:2",
        "metadata.log.dir": "/dA",
        "cont": "a#not a comment",
        "k ey": "= v ",
        "empty": "",
        "sep": "x",
        "last": "z",
    }


def test_line_ends_are_java_s_only() -> None:
    # U+0085 is a byte of many UTF-8 characters read as Latin-1 (`Å` is C3 85): not a line end.
    assert parse("a=x\x85y\x0bz\nb=1") == {"a": "x\x85y\x0bz", "b": "1"}


def test_surrogate_escapes_make_one_character() -> None:
    assert parse("k=\\uD83D\\uDE00 \\uD83D") == {"k": "😀 \ud83d"}


class AddressBook:
    """Just the addresses of a backend, under a node directory full of escape-worthy characters."""

    def node_dir(self, node: str) -> str:
        return f"/runs/run #1: a=b \\ é/{node}"

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return "127.0.0.1", 9000 + int(node[1:]) + (100 if port == "metrics" else 0)

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return "127.0.0.1", 19000 + 10 * int(src[1:]) + int(dst[1:])

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return "127.0.0.1", 9000 + int(node[1:])


def test_the_harness_writes_the_node_config_it_means() -> None:
    backend = cast(Backend, AddressBook())
    overrides = {"unsafe": "no-check-quorum", "read.mode": "leader"}
    text = node_properties(backend, ["n1", "n2", "n3"], "n2", overrides)
    assert text.isascii()
    props = parse(text)
    assert props == {
        "node.id": "2",
        "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:19021,2@127.0.0.1:9002,3@127.0.0.1:19023",
        "listeners": "CONTROLLER://127.0.0.1:9002",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": "/runs/run #1: a=b \\ é/n2/data",
        "client.voters": "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003",
        "metrics.port": "9102",
        "events.dir": "/runs/run #1: a=b \\ é/n2",
        **overrides,
    }
    config = from_properties(props)
    assert config.node_id == 2
    assert config.metadata_log_dir == Path("/runs/run #1: a=b \\ é/n2/data")
    assert str(config.voters[1]) == "127.0.0.1:19021"
