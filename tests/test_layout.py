"""The package's layout holds: the import contract is checked and catches a bad import,
public names stay where users find them, and user-input errors are InputError."""

from __future__ import annotations

import doctest
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit import InputError

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """framekit's sources and its import contract, copied where a test may break them."""
    if not LINT_IMPORTS.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    shutil.copytree(
        ROOT / "framekit", tmp_path / "framekit", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def _add_line(path: Path, line: str) -> None:
    text = path.read_text()
    # After the module docstring and the __future__ import, where an import belongs.
    anchor = "from __future__ import annotations\n"
    assert anchor in text, path
    path.write_text(text.replace(anchor, anchor + line + "\n", 1))


def test_the_import_contract_holds(tree_copy: Path) -> None:
    result = _lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tree_copy: Path) -> None:
    # The column contract is a shared basic: it must not reach up into the engine.
    _add_line(tree_copy / "framekit" / "_result_columns.py", "import framekit.engine.plan")
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "framekit._result_columns -> framekit.engine.plan" in result.stdout


def test_a_cycle_inside_a_package_breaks_the_contract(tree_copy: Path) -> None:
    # Two modules of one layer importing each other: only the cycle check sees it.
    _add_line(
        tree_copy / "framekit" / "evaluators" / "base.py", "import framekit.evaluators.rubric"
    )
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "No cycles are allowed in framekit.evaluators" in result.stdout


def test_analysis_may_not_reach_into_the_engine(tree_copy: Path) -> None:
    _add_line(tree_copy / "framekit" / "analysis" / "plot.py", "import framekit.engine.cache")
    result = _lint_imports(tree_copy)
    assert result.returncode != 0
    assert "framekit.analysis.plot -> framekit.engine.cache" in result.stdout


def test_public_names_are_where_they_were() -> None:
    from framekit.analysis import compare, summarize, write_html_report

    assert fk.summarize is summarize
    assert fk.compare is compare
    assert fk.write_html_report is write_html_report
    assert fk.plot.means.__module__ == "framekit.analysis.plot"
    assert fk.report.summarize is summarize  # fk.report: the old home of the analysis
    import framekit.plot as fkplot  # `import framekit.plot` keeps working

    assert fkplot.distributions is fk.plot.distributions
    for name in fk.__all__:
        assert getattr(fk, name) is not None, name


def test_python_dash_m_framekit_is_the_framekit_command(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    missing = str(tmp_path / "missing.parquet")
    results = [
        subprocess.run(
            [sys.executable, *launcher, "evaluate", missing, "-o", "x.parquet", "-e", "coherence"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        for launcher in (["-m", "framekit"], ["-m", "framekit.cli"])
    ]
    assert [r.returncode for r in results] == [2, 2]
    assert results[0].stderr == results[1].stderr
    assert "framekit: error:" in results[0].stderr and "Traceback" not in results[0].stderr


def test_a_judge_of_the_wrong_type_is_an_input_error() -> None:
    df = pl.DataFrame({"question": ["q"], "docs": ["d"]})
    from framekit.evaluators import RetrievalRelevance

    with pytest.raises(InputError, match="judge must be a model string") as caught:
        fk.evaluate_dataframe(
            df, [RetrievalRelevance()], {"input": "question", "context": "docs"},
            judge=42, cache=False, progress=False,  # type: ignore[arg-type]
        )  # fmt: skip
    assert isinstance(caught.value, TypeError)  # what it raised before, still caught


def test_a_bad_trace_level_or_a_missing_export_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="level must be"):
        fk.traces.load(tmp_path, level="turn")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no such span export") as caught:
        fk.traces.load(tmp_path / "nope.jsonl")
    assert isinstance(caught.value, FileNotFoundError)  # what it raised before


def test_a_classification_evaluator_is_a_rubric_built_through_its_base() -> None:
    from framekit.evaluators import ClassificationEvaluator, RetrievalRelevance

    tone = ClassificationEvaluator("tone", "Polite?\n{output}", {"polite": 1.0, "rude": 0.0})
    builtin = RetrievalRelevance()
    # Every attribute a built-in rubric sets in __init__ is set on the custom one too.
    assert set(vars(builtin)) - {"_schema_cache"} <= set(vars(tone))
    assert tone.spec.user == "Polite?\n{output}" and tone.version == "custom"
    request = tone.build_request({"output": "thanks!"})
    assert "thanks!" in request.messages[1]["content"]
    assert request.choices == ("polite", "rude")


@pytest.mark.parametrize(
    "module",
    [
        "framekit._result_columns",
        "framekit._dependencies",
        "framekit._errors",
        "framekit._score",
        "framekit.analysis._table",
        "framekit.analysis.report",
        "framekit.cli.main",
        "framekit.engine.cache_table",
        "framekit.engine.cache_values",
        "framekit.engine.plan",
        "framekit.engine.keys",
        "framekit.evaluators._message_template",
        "framekit.evaluators.registry",
        "framekit.evaluators.rubric",
        "framekit.judges.credentials",
        "framekit.judges.decoding",
        "framekit.judges.endpoint",
        "framekit.judges.judge",
        "framekit.judges.providers",
        "framekit.judges.request",
        "framekit.judges.transport",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# -- the contract covers every module; no module reaches into another's private parts ---


def _modules(tree: Path) -> list[str]:
    """Every module of ``tree``/framekit, as a dotted name (a package by its own name)."""
    names = []
    for path in sorted((tree / "framekit").rglob("*.py")):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _outside_the_contract(tree: Path) -> list[str]:
    """The modules of ``tree`` that no contract of its .importlinter names (a package
    named covers its modules; the root package re-exports and is above every layer)."""
    import configparser
    import re

    config = configparser.ConfigParser()
    config.read(tree / ".importlinter")
    named: set[str] = set()
    for section in config.sections():
        for key in ("layers", "source_modules", "forbidden_modules", "modules"):
            named |= set(re.findall(r"framekit(?:\.\w+)*", config[section].get(key, "")))
    return [
        module
        for module in _modules(tree)
        if module != "framekit"
        and not any(module == n or module.startswith(n + ".") for n in named)
    ]


def test_every_module_is_in_a_layer_of_the_import_contract() -> None:
    assert _outside_the_contract(ROOT) == [], "add them to a layer of .importlinter"


def test_a_new_module_in_no_layer_is_listed(tree_copy: Path) -> None:
    (tree_copy / "framekit" / "newcomer.py").write_text('"""Not yet in a layer."""\n')
    (tree_copy / "framekit" / "engine" / "helper.py").write_text('"""In the engine\'s."""\n')
    assert _outside_the_contract(tree_copy) == ["framekit.newcomer"]


def test_the_contract_ignores_no_import() -> None:
    assert "ignore_imports" not in (ROOT / ".importlinter").read_text()


def _private_access(path: Path, tree: Path = ROOT) -> list[str]:
    """``obj._name`` reads and writes in ``path`` where ``obj`` is another object: not
    ``self._x``/``cls._x``/``super()._x``, not a dunder, and not inside a class that has
    ``_name`` itself (a method, a class attribute, an attribute it sets on ``self``: a
    class may read its own kind's attributes on another instance). A function outside
    the class reaching into its instances (``judge._assemble(values)``) is found."""
    import ast

    def own_names(cls: ast.ClassDef) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.add(stmt.target.id)
            elif isinstance(stmt, ast.Assign):
                names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        return names

    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, own: frozenset[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = own | own_names(node)
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not (node.attr.startswith("__") and node.attr.endswith("__"))
            and node.attr not in own
        ):
            base = node.value
            mine = isinstance(base, ast.Name) and base.id in ("self", "cls")
            if not mine and not (
                isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super"
            ):
                found.append((node.lineno, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(ast.parse(path.read_text(), str(path)), frozenset())
    return [f"{path.relative_to(tree)}:{line}: {text}" for line, text in sorted(found)]


#: Private attributes of other libraries that framekit reaches for on purpose.
FOREIGN_PRIVATE = {
    # The SmolLM2 server's child leaves without running the destructor that once hung.
    "framekit/testing/llama_server.py": {"_exit"},
}


def test_no_module_reads_or_writes_another_objects_private_attributes() -> None:
    found = [
        line
        for path in sorted((ROOT / "framekit").rglob("*.py"))
        for line in _private_access(path)
        if line.rsplit(".", 1)[-1] not in FOREIGN_PRIVATE.get(str(path.relative_to(ROOT)), ())
    ]
    assert not found, "\n".join(found)


def test_a_judges_key_read_in_another_module_is_found(tmp_path: Path) -> None:
    module = tmp_path / "framekit" / "transport.py"
    module.parent.mkdir()
    module.write_text(
        "def headers(judge):\n"
        "    return {'authorization': judge._api_key}\n"
        "def patch(judge, limiter):\n"
        "    judge._limiter = limiter\n"
        "class Own:\n"
        "    def __init__(self):\n"
        "        self._x = 1\n"
        "    def copy(self, other):\n"
        "        other._x = self._x\n"
    )
    assert _private_access(module, tmp_path) == [
        "framekit/transport.py:2: judge._api_key",
        "framekit/transport.py:4: judge._limiter",
    ]


def test_a_function_reaching_into_its_modules_own_class_is_found(tmp_path: Path) -> None:
    # The class may assemble itself; a function beside it may not do it for the class.
    module = tmp_path / "framekit" / "judge.py"
    module.parent.mkdir()
    module.write_text(
        "class Judge:\n"
        "    def _assemble(self, values):\n"
        "        self._values = values\n"
        "    def same(self, other):\n"
        "        return other._values == self._values\n"
        "def restore(values):\n"
        "    judge = object.__new__(Judge)\n"
        "    judge._assemble(values)\n"
        "    return judge\n"
        "def relay(server):\n"
        "    class Front:\n"
        "        def post(self):\n"
        "            return server._forward()\n"
        "    return Front\n"
    )
    assert _private_access(module, tmp_path) == [
        "framekit/judge.py:8: judge._assemble",
        "framekit/judge.py:13: server._forward",
    ]


def _exception_classes_outside_errors_py(tree: Path) -> list[str]:
    """Classes deriving from an exception that are defined elsewhere than _errors.py."""
    import ast
    import builtins

    errors = tree / "framekit" / "_errors.py"
    known = {
        n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    known |= {
        n.name for n in ast.walk(ast.parse(errors.read_text())) if isinstance(n, ast.ClassDef)
    }
    outside = []
    for path in sorted((tree / "framekit").rglob("*.py")):
        if path == errors:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                if bases & known:
                    outside.append(f"{path.relative_to(tree)}: {node.name}")
    return outside


def test_every_exception_class_is_defined_in_errors_py(tree_copy: Path) -> None:
    assert _exception_classes_outside_errors_py(ROOT) == []
    # The check sees one defined elsewhere.
    (tree_copy / "framekit" / "engine" / "oops.py").write_text(
        "from framekit._errors import JudgeError\nclass Oops(JudgeError):\n    pass\n"
    )
    assert _exception_classes_outside_errors_py(tree_copy) == ["framekit/engine/oops.py: Oops"]
    assert issubclass(fk.MissingDependency, fk.FramekitError)
    assert issubclass(fk.MissingDependency, ImportError)


#: Client libraries the engine never imports: each client classifies its own failures
#: into a Fault where the call is made (framekit.judges), so only verdicts reach it.
CLIENT_LIBRARIES = ("aiohttp", "httpx", "requests", "urllib3", "litellm", "openai")


def _client_imports(tree: Path) -> list[str]:
    """Imports of a client library anywhere in ``tree``/framekit/engine (also inside
    functions and behind ``TYPE_CHECKING``)."""
    import ast

    found = []
    for path in sorted((tree / "framekit" / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in CLIENT_LIBRARIES:
                    found.append(f"{path.relative_to(tree)}:{node.lineno}: {name}")
    return found


def test_the_engine_imports_no_http_or_llm_client_library(tree_copy: Path) -> None:
    assert _client_imports(ROOT) == []
    # The check sees one, even imported late inside a function.
    (tree_copy / "framekit" / "engine" / "leak.py").write_text(
        "def post():\n    import aiohttp.client\n    return aiohttp.client\n"
    )
    assert _client_imports(tree_copy) == ["framekit/engine/leak.py:2: aiohttp.client"]


# -- no import circle, counting the imports made only for type checking ------------------


def _import_circles(tree: Path) -> list[list[str]]:
    """The import circles among the modules of ``tree``/framekit: every import counts,
    those inside functions and behind ``if TYPE_CHECKING:`` too (a type that points back
    up is a circle the reader follows, even where the interpreter does not). Each circle
    is a sorted list of modules (a strongly connected component of the import graph)."""
    import ast

    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted((tree / "framekit").rglob("*.py")):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = (path, path.name == "__init__.py")

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, (path, package) in modules.items():
        here = module if package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = here
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    source = f"{base}.{source}" if source else base
                # `from pkg import name`: the submodule pkg.name if it is one, else pkg.
                targets = [f"{source}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                found = module_of(target) if target.startswith("framekit") else None
                if found and found != module:
                    graph[module].add(found)

    # Tarjan's strongly connected components, iteratively (no recursion limit to meet).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


def test_no_import_circle_even_through_type_checking_imports() -> None:
    assert _import_circles(ROOT) == [], "a module imports one that imports it back"


def test_a_circle_closed_by_a_type_checking_import_is_found(tree_copy: Path) -> None:
    # The errors naming an engine type for the type checker only: still a circle (the
    # planner raises the errors).
    _add_line(
        tree_copy / "framekit" / "_errors.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from framekit.engine.plan import ChatPlan",
    )
    circles = _import_circles(tree_copy)
    assert len(circles) == 1
    assert {"framekit._errors", "framekit.engine.plan"} <= set(circles[0])
