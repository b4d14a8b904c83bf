"""The import contract: dependencies between pairbot's packages point one way.

docs/architecture.md draws the same picture.

Every `import` and `from … import` in the product counts, lazy ones inside functions and
type-only ones under `TYPE_CHECKING` included: a lazy import is still a dependency, it only
moves the cost. (The CLI's one late import, its verb table `app.cli.entry.VERBS`, names
modules of app/cli/ only: tests/cli/test_cli_imports.py checks it.) The rules are a table
(importer prefix, forbidden prefixes, allowed exceptions, exempt importers) so a new package
states its place by adding a row, and a violation names the file, the line and the rule it
breaks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "hosts", "action")

# The pure pieces of hosts/ every layer may use: models, errors, markers, labels, hashes.
HOSTS_PURE = (
    "hosts.base",
    "hosts.models",
    "hosts.errors",
    "hosts.labels",
    "hosts.markers",
    "hosts.cardhash",
    "hosts.decisions",
    "hosts.identities",
    "hosts.vocabulary",
)
SURFACES = ("app.web", "app.cli", "action")
# The kernel every layer shares, in app/'s root: the settings cascade, the error tree, and the
# one line every surface ends an expected failure with.
KERNEL = ("app.settings", "app.errors", "app.failures")


@dataclass(frozen=True)
class Rule:
    """Modules under `importer` may not import `forbidden`, except what `allowed` names; the
    importers under `exempt` are outside the rule."""

    name: str
    importer: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


CYCLE_WITHOUT_RUNTIME = Rule(
    "the card cycle reaches agents only through the engine: it never imports the runtime",
    "app.cycle",
    ("app.runtime",),
)
NOTHING_IMPORTS_THE_CLI = Rule(
    "the CLI is a surface: nothing else in app/ imports it",
    "app",
    ("app.cli",),
    exempt=("app.cli",),
)
WEB_ONLY_FOR_SERVE = Rule(
    "only `pairbot serve` loads the App's web edge (every other verb starts without it)",
    "app.cli",
    ("app.web",),
    exempt=("app.cli.serve",),
)
KERNEL_RULES = tuple(
    Rule(
        f"the kernel ({kernel}) sits under every package of app/ and imports none of them",
        kernel,
        ("app", "action"),
        allowed=KERNEL,
    )
    for kernel in KERNEL
)


RULES = (
    Rule("hosts/ never imports app/ or action/", "hosts", ("app", "action")),
    Rule(
        "app/domain is pure policy: no engine, cycle, runtime, web, store, surface or adapter",
        "app.domain",
        ("app", "hosts", "action"),
        allowed=("app.domain", "app.errors", "app.settings", *HOSTS_PURE),
    ),
    Rule(
        "the engine reaches agents only through its seam and knows no host, cycle or surface",
        "app.engine",
        ("app.runtime", "app.cycle", "app.hosting", "app.store", "hosts", *SURFACES),
        allowed=("app.proc",),
    ),
    Rule(
        "the runtime sits under the engine's agent seam; it knows no cycle, host or surface",
        "app.runtime",
        ("app.cycle", "app.hosting", "app.store", "app.engine", "hosts", *SURFACES),
        # The seam's types only (`pairbot doctor`, which reads the project files, is app.cli's).
        allowed=("app.engine.agent",),
    ),
    Rule(
        "the card cycle is driven by the surfaces, never the other way round",
        "app.cycle",
        ("app.store", *SURFACES),
    ),
    CYCLE_WITHOUT_RUNTIME,
    Rule(
        "the store is a leaf: deliveries and jobs, no policy",
        "app.store",
        ("app", "hosts", "action"),
        allowed=("app.store", "app.errors"),
    ),
    Rule(
        "the process helpers are a leaf shared by the engine, the runtime and the cycle",
        "app.proc",
        ("app", "hosts", "action"),
    ),
    Rule("the App does not import the Action", "app.web", ("action", "app.cli")),
    Rule("the CLI does not import the Action", "app.cli", ("action",)),
    NOTHING_IMPORTS_THE_CLI,
    WEB_ONLY_FOR_SERVE,
    *KERNEL_RULES,
    Rule("the Action does not import the App's web edge", "action", ("app.web", "app.cli")),
    Rule(
        "the CI run driver knows neither CI: no workflow or logging commands, no Actions "
        "context, event or pipeline settings, no host adapter (each platform brings its own)",
        "action.run",
        (
            "action.workflow",
            "action.context",
            "action.event",
            "action.early",
            "action.github_actions",
            "action.azure",
            "hosts.github",
            "hosts.azure_devops",
        ),
    ),
    Rule(
        "the Azure Pipelines entry speaks Azure DevOps only: no GitHub adapter, workflow "
        "commands or Actions context",
        "action.azure",
        ("hosts.github", "action.workflow", "action.context"),
    ),
)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file; `from a import b` yields a.b too,
    since `b` may be a submodule and a rule may name it."""
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=str(path))
    package = _module_of(path).rsplit(".", 1)[0] if path.name != "__init__.py" else None
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                anchor = (package or _module_of(path)).split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.append((node.lineno, f"{base}.{alias.name}"))
    return found


def _violations(rule: Rule, imports: dict[str, list[tuple[int, str]]]) -> list[str]:
    out: list[str] = []
    for module, found in imports.items():
        if not _under(module, rule.importer) or any(_under(module, e) for e in rule.exempt):
            continue
        for line, target in found:
            if not any(_under(target, f) for f in rule.forbidden):
                continue
            if any(_under(target, a) for a in rule.allowed):
                continue
            out.append(f"{module}:{line} imports {target}")
    return out


def _product_imports() -> dict[str, list[tuple[int, str]]]:
    return {
        _module_of(path): _imports(path)
        for top in PRODUCT
        for path in sorted((ROOT / top).rglob("*.py"))
    }


IMPORTS = _product_imports()


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_dependencies_point_one_way(rule: Rule) -> None:
    assert _violations(rule, IMPORTS) == [], rule.name


def test_the_contract_sees_every_product_package() -> None:
    packages = {
        m.split(".")[0] if m.split(".")[0] != "app" else ".".join(m.split(".")[:2]) for m in IMPORTS
    }
    for expected in (
        "hosts",
        "action",
        "app.domain",
        "app.engine",
        "app.cycle",
        "app.runtime",
        "app.web",
        "app.store",
        "app.cli",
    ):
        assert expected in packages
    for kernel in KERNEL:  # the kernel stays a module in app/'s root
        assert kernel in IMPORTS, kernel
    assert "action.azure.__main__" in IMPORTS  # the Azure Pipelines entry is under contract


@pytest.mark.parametrize(
    ("rule", "module", "target", "breaks"),
    [
        pytest.param(RULES[0], "hosts.github", "app.errors", True, id="hosts-importing-app"),
        pytest.param(RULES[0], "hosts.github", "hosts.markers", False, id="hosts-internal"),
        pytest.param(
            RULES[1], "app.domain.x", "app.engine.step", True, id="domain-importing-engine"
        ),
        pytest.param(RULES[1], "app.domain.x", "hosts.markers", False, id="domain-pure-hosts"),
        pytest.param(RULES[1], "app.domain.x", "hosts.github", True, id="domain-importing-adapter"),
        pytest.param(RULES[2], "app.engine.step", "app.runtime.rex", True, id="engine-to-runtime"),
        pytest.param(
            RULES[2], "app.engine.step", "app.domain.review.verdict", False, id="engine-to-domain"
        ),
        pytest.param(RULES[3], "app.runtime.rex", "app.engine.agent", False, id="runtime-to-seam"),
        pytest.param(RULES[3], "app.runtime.rex", "app.engine.step", True, id="runtime-past-seam"),
        pytest.param(
            CYCLE_WITHOUT_RUNTIME, "app.cycle.x", "app.runtime.launcher", True, id="cycle-runtime"
        ),
        pytest.param(
            CYCLE_WITHOUT_RUNTIME, "app.cycle.x", "app.engine.agent", False, id="cycle-seam"
        ),
        pytest.param(NOTHING_IMPORTS_THE_CLI, "app.engine.x", "app.cli", True, id="engine-to-cli"),
        pytest.param(NOTHING_IMPORTS_THE_CLI, "app.hosting", "app.cli.deps", True, id="root-cli"),
        pytest.param(
            NOTHING_IMPORTS_THE_CLI, "app.cli.card", "app.cli.deps", False, id="cli-internal"
        ),
        pytest.param(WEB_ONLY_FOR_SERVE, "app.cli.status", "app.web.serve", True, id="cli-to-web"),
        pytest.param(WEB_ONLY_FOR_SERVE, "app.cli.serve", "app.web.serve", False, id="serve-web"),
        pytest.param(KERNEL_RULES[0], "app.settings", "app.engine.x", True, id="kernel-up"),
        pytest.param(KERNEL_RULES[2], "app.failures", "app.errors", False, id="kernel-kernel"),
        pytest.param(
            RULES[-1], "action.azure.x", "action.workflow", True, id="pipeline-to-workflow"
        ),
        pytest.param(
            RULES[-2], "action.run.driver", "action.azure.vso", True, id="driver-to-a-platform"
        ),
        pytest.param(
            RULES[-2], "action.run.act", "action.comments", False, id="driver-to-comments"
        ),
        pytest.param(
            RULES[-1], "action.azure.x", "action.statebranch", False, id="pipeline-state-branch"
        ),
    ],
)
def test_a_rule_catches_what_it_names(rule: Rule, module: str, target: str, breaks: bool) -> None:
    assert bool(_violations(rule, {module: [(1, target)]})) is breaks


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import app.runtime.rex", id="import"),
        pytest.param("from app.runtime import launcher", id="from-package"),
        pytest.param("from app import runtime", id="from-app"),
        pytest.param("from .. import runtime as r", id="relative-package"),
        pytest.param("def lazy() -> None:\n    from ..runtime.adapters import ADAPTERS", id="lazy"),
    ],
)
def test_the_parser_sees_every_form_of_import(source: str) -> None:
    # The contract is only as good as this parser.
    found = _imports(ROOT / "app" / "engine" / "probe.py", source + "\n")
    assert _violations(RULES[2], {"app.engine.probe": found})


def test_the_parser_is_not_fooled_by_a_lookalike() -> None:
    found = _imports(ROOT / "app" / "engine" / "probe.py", "import app.runtimes\n")
    assert not _violations(RULES[2], {"app.engine.probe": found})
