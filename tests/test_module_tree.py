"""docs/architecture.md's module tree is generated from each module's docstring (issue 49 part 5):
it is current, and the generator lists packages, modules, missing docstrings and modules that do
not parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import module_tree


def test_the_tree_in_architecture_md_is_current():
    path = module_tree.ROOT / module_tree.DOC
    text = path.read_text(encoding="utf-8")
    assert module_tree.render_doc(text) == text, f"{module_tree.DOC} is stale: run `{module_tree.COMMAND}`"


def test_every_module_of_the_three_packages_is_in_the_tree():
    tree = module_tree.render_tree()
    for pkg in module_tree.PACKAGES:
        for path in (module_tree.ROOT / pkg).rglob("*.py"):
            if path.name != "__init__.py" and (path.parent / "__init__.py").exists():
                assert f" {path.name} " in tree or f" {path.name}\n" in tree, path


def test_the_generator_on_a_small_package(tmp_path: Path, monkeypatch):
    pkg = tmp_path / "harness"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The harness (a test one). Second sentence."""\n')
    (pkg / "a.py").write_text('"""First line of a, which runs on\nto the second line. Not this."""\n')
    (pkg / "b.py").write_text("x = 1\n")
    (pkg / "c.py").write_text("def (:\n")
    (pkg / "sub" / "__init__.py").write_text('"""A subpackage, e.g. one (Sec. 4. of a paper) deep."""\n')
    (pkg / "sub" / "d.py").write_text('"""' + "word " * 40 + '"""\n')
    lines = module_tree.render_tree(tmp_path).splitlines()
    assert lines[0] == "```" and lines[-1] == "```"
    names = [ln.split()[0] for ln in lines[1:-1]]
    assert names == ["harness/", "a.py", "b.py", "c.py", "sub/", "d.py"]
    text = "\n".join(lines)
    assert "The harness (a test one)." in text and "Second sentence" not in text
    assert "First line of a, which runs on to the second line." in text
    assert "(no docstring)" in text and "(does not parse: SyntaxError)" in text
    assert "A subpackage, e.g. one (Sec. 4. of a paper) deep." in text
    assert lines[-2].endswith(" …") and len(lines[-2]) < 160


def test_render_doc_needs_both_markers():
    with pytest.raises(ValueError, match="markers"):
        module_tree.render_doc("no markers here")
    doc = f"before\n{module_tree.BEGIN}\nold\n{module_tree.END}\nafter\n"
    new = module_tree.render_doc(doc)
    assert new.startswith(f"before\n{module_tree.BEGIN}\n```\nharness/") and new.endswith(f"```\n{module_tree.END}\nafter\n")
