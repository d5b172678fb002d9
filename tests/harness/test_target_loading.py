"""`--target module:attribute` (harness/targets/__init__.py, issue 46): an instance, a class or a
factory of a Target, from the import path or the current directory; every hook a target may
override is declared, with its default, on `contracts.target.Target`."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from contracts.target import Target
from harness import targets

PLUGIN = textwrap.dedent('''
    from contracts.target import Target

    class Mine(Target):
        name = "mine"
        ports = {"mine": 7100}

        def db(self):
            raise NotImplementedError

    INSTANCE = Mine()

    def factory():
        return Mine()

    NOT_A_TARGET = 42

    def makes_a_string():
        return "mine"
''')


@pytest.fixture
def plugin_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module `mine_<test>` in the current directory, which is not on the import path (as
    under the `kraft` console script): its name is returned."""
    name = f"mine_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(PLUGIN)
    monkeypatch.chdir(tmp_path)
    here = str(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", here)])
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


@pytest.mark.parametrize("attribute", ["Mine", "INSTANCE", "factory"])
def test_a_class_an_instance_or_a_factory_is_a_target(plugin_here: str, attribute: str) -> None:
    target = targets.get(f"{plugin_here}:{attribute}")
    assert isinstance(target, Target) and target.name == "mine"


def test_what_is_no_target_is_refused_with_what_it_is(plugin_here: str) -> None:
    with pytest.raises(targets.UnknownTarget, match="is not a Target, a Target class or a "
                       r"factory of one \(it is a int\)"):
        targets.get(f"{plugin_here}:NOT_A_TARGET")
    with pytest.raises(targets.UnknownTarget, match=r"made a str, not a Target"):
        targets.get(f"{plugin_here}:makes_a_string")
    with pytest.raises(targets.UnknownTarget, match="cannot be loaded: No module named"):
        targets.get("no_such_module_anywhere:Target")


def test_the_example_loads_by_its_dotted_name_from_the_root(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if p not in ("", ".", str(root))])
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)
    target = targets.get("examples.toy:ToyTarget")
    assert target.name == "toy" and target.workloads() == ["append"]


def test_every_optional_hook_has_a_default_on_the_base_class() -> None:
    """The harness calls these on any target, never looking them up by name."""

    class Bare(Target):
        name = "bare"
        ports: dict[str, int] = {}

        def db(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    bare = Bare()
    assert bare.check_node_config({"any": "thing"}) is None
    assert bare.check_nodes(7) is None
    assert bare.missing("local") is None and bare.image_packages() == ()
    assert bare.workloads() == []
