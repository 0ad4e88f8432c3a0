"""Tests that cannot hide: a static check of the test and benchmark sources (issue 41).

The rule, read from each file's syntax tree (ast), nothing imported or run:
- no `importorskip` of a first-party module: a call to `importorskip` (as `pytest.importorskip`
  or imported by name) whose first argument is a string naming a module of this repository (a
  top-level package of the checkout: harness, strategies, datasets, tests, ...; or a module of
  benchmarks/). Such a test skips when the project's own module breaks at import, and CI passes;
  third-party optional modules may still be skipped on;
- no `return` in a hypothesis property test: a `return` statement anywhere in the body of a
  function decorated with `given` (`@given(...)` or `@hypothesis.given(...)`), nested functions and
  lambdas excluded. A property test returns nothing, so a return can only end an example early,
  which hypothesis counts as a pass; `hypothesis.assume` rejects the example instead (and
  hypothesis fails the test when it has to reject too many).
The check is tested on small bad and good snippets, so that it can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("tests", "benchmarks")


def first_party_modules(root: Path = ROOT) -> set[str]:
    """Top-level packages of the checkout (directories with an __init__.py) and benchmarks' modules
    (imported by name from benchmarks/, which pytest puts on the path)."""
    names = {p.parent.name for p in root.glob("*/__init__.py")}
    names |= {p.stem for p in (root / "benchmarks").glob("*.py")}
    return names


def _is_given(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Name) and target.id == "given") or (
        isinstance(target, ast.Attribute) and target.attr == "given")


def _returns(fn: ast.AST):
    """Return statements of fn's own body (not of functions or lambdas nested in it)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def violations(source: str, filename: str = "<snippet>", first_party: set[str] | None = None) -> list[str]:
    """Every breach of the module docstring's rule in one file's source, as 'file:line: why'."""
    first_party = first_party_modules() if first_party is None else first_party
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name == "importorskip" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] in first_party:
                found.append(f"{filename}:{node.lineno}: importorskip of the first-party module "
                             f"{node.args[0].value!r} (import it: a broken import must fail, not skip)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_given, node.decorator_list)):
            for ret in _returns(node):
                found.append(f"{filename}:{ret.lineno}: return in the @given test {node.name} "
                             "(use hypothesis.assume: an early return counts the example as a pass)")
    return found


def test_the_suites_hide_nothing():
    files = sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 50  # the scan reaches the suites
    found = [v for p in files for v in violations(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == []


def test_the_check_fails_on_a_first_party_importorskip():
    bad = ('import pytest\n'
           'def test_a():\n'
           '    sim = pytest.importorskip("harness.engine.simulate").simulate\n'
           '    assert sim\n')
    found = violations(bad, first_party={"harness", "strategies"})
    assert len(found) == 1 and "harness.engine.simulate" in found[0] and ":3:" in found[0]
    by_name = 'from pytest import importorskip\nmod = importorskip("strategies")\n'
    assert len(violations(by_name, first_party={"harness", "strategies"})) == 1
    # a third-party optional module may be skipped on
    assert violations('import pytest\npytest.importorskip("pyspark")\n', first_party={"harness"}) == []


def test_the_check_fails_on_an_early_return_in_a_property_test():
    bad = ('from hypothesis import given, strategies as st\n'
           '@given(st.integers())\n'
           'def test_p(x):\n'
           '    if x < 0:\n'
           '        return\n'
           '    assert x >= 0\n')
    found = violations(bad, first_party=set())
    assert len(found) == 1 and "test_p" in found[0] and ":5:" in found[0]
    qualified = bad.replace("from hypothesis import given, strategies as st", "import hypothesis\nfrom hypothesis "
                            "import strategies as st").replace("@given", "@hypothesis.given")
    assert len(violations(qualified, first_party=set())) == 1
    # assume, and a return inside a nested helper, are fine; so is a return in an undecorated test
    good = ('from hypothesis import assume, given, strategies as st\n'
            '@given(st.integers())\n'
            'def test_p(x):\n'
            '    assume(x >= 0)\n'
            '    def half(v):\n'
            '        return v // 2\n'
            '    key = lambda v: v\n'
            '    assert half(key(x)) >= 0\n'
            'def helper():\n'
            '    return 1\n')
    assert violations(good, first_party=set()) == []


def test_first_party_modules_are_the_checkouts():
    names = first_party_modules()
    assert {"harness", "strategies", "datasets", "bench_data"} <= names and "numpy" not in names
