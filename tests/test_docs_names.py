"""Docs that the code checks (issue 41, item 8).

The pages under ``docs/``, each role's README, CONTRIBUTING.md and README.md name the
code's modules, functions, files, playbooks, filters, plugins and variables. A name that
no longer exists sends a reader (and a contributor following a recipe) nowhere, so each
kind of name is looked up in the tree:

- a dotted ``clusterforge.x.y`` (a module, then attributes: a function, a class, a
  constant) is imported; so is a dotted name in a service's package
  (``clusterforge_userdir.settings``);
- ``clusterforge.stack.X`` (the collection's FQCN) is a role, a plugin or a playbook;
- a backticked path in the checkout (``roles/x/tasks/y.yml``, ``playbooks/x.yml``,
  ``src/...``, ``scripts/x``, ``plugins/...``, ...) exists; in a role's README, a path
  of the role's own (``tasks/x.yml``) exists in that role;
- a relative Markdown link points at a file that exists;
- a backticked variable with a prefix of ours (``opensearch_``, ``user_directory_``, ...)
  is declared in the schema, a role's defaults or argument specs, or is one of the
  names the plan gives (the run's groups), or a role;
- a backticked ``clusterforge_*`` name is a plugin, a filter, a service's package, or a
  name the code defines.

``docs/architecture.md``'s module map and plugin table are checked against the tree both
ways: every row exists, and every module and plugin has a row (the filters by their
number). Its layout of the checkout lists every playbook, role, inventory and script.

Names kept on purpose although nothing defines them are in :data:`HISTORICAL`, each with
its reason.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.schema import load_schema
from collection_plugins import load_plugin

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "clusterforge"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# (page relative to the checkout, name) -> why the page may name something that does not
# exist. Keep this short: a stale name is fixed in the page, not listed here.
HISTORICAL: dict[tuple[str, str], str] = {}
# (page, word) -> why every name holding the word is invented: a recipe's worked example
# names the files a contributor is about to create.
WORKED_EXAMPLES: dict[tuple[str, str], str] = {
    ("CONTRIBUTING.md", "thread_pool_write_size"): "Recipe 1 adds this variable as its example",
    ("CONTRIBUTING.md", "reindex"): "Recipe 2 adds playbooks/reindex.yml and its role",
    ("CONTRIBUTING.md", "audit"): "Recipe 3 adds the service audit and its role",
    ("CONTRIBUTING.md", "plan_alerts"): "Recipe 4 adds a plan section and its module",
    ("CONTRIBUTING.md", "plan/monitoring/alerts.py"): "Recipe 4 adds a plan section and its module",
}
# Paths that the tools write and a clean clone does not hold, with what writes them.
WRITTEN_BY_TOOLS = {
    "inventories/lab/": "scripts/up writes the lab's inventory, secrets and ssh keys",
}

# The top-level entries of the checkout a backticked path may start with.
_CHECKOUT_ROOTS = (
    ".ci/",
    "bench/",
    "docs/",
    "engine-plugins/",
    "inventories/",
    "meta/",
    "molecule/",
    "playbooks/",
    "plugins/",
    "roles/",
    "scripts/",
    "services/",
    "src/",
    "tests/",
)
_CHECKOUT_FILES = (
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "README.md",
    "LICENSE",
    "ansible.cfg",
    "galaxy.yml",
    "pyproject.toml",
)
# A role's own directories, named from its README without the role's path.
_ROLE_DIRS = ("tasks/", "handlers/", "defaults/", "vars/", "meta/", "templates/", "files/")
# The prefixes of the variables the docs name (the schema's and the other roles').
VARIABLE_PREFIXES = (
    "opensearch_",
    "dashboards_",
    "user_directory_",
    "order_service_",
    "postgresql_",
    "certificates_",
    "tls_proxy_",
)
_PLACEHOLDER = re.compile(r"[<>*{}\[\]$|]|\.\.\.")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(
    r"(?<![\w./-])(clusterforge(?:_userdir|_orders)?(?:\.[A-Za-z_]\w*)+)(?![\w/-])"
)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_WORD = re.compile(r"\b\w+\b")


def doc_pages() -> list[Path]:
    pages = [
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "roles").glob("*/README.md")),
        ROOT / "CONTRIBUTING.md",
        ROOT / "README.md",
    ]
    return [page for page in pages if page.is_file()]


@dataclass(frozen=True)
class Name:
    page: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def excused(self) -> bool:
        """Named on purpose although nothing defines it (:data:`HISTORICAL`,
        :data:`WORKED_EXAMPLES`)."""
        page = str(self.page.relative_to(ROOT))
        return (page, self.text) in HISTORICAL or any(
            page == example_page and word in self.text for example_page, word in WORKED_EXAMPLES
        )


def _lines(page: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(page.read_text().splitlines(), start=1)


def backticked(page: Path) -> Iterator[Name]:
    for number, line in _lines(page):
        for match in _BACKTICKED.finditer(line):
            yield Name(page, number, match.group(1).strip())


def first_word(text: str) -> str:
    """The name a backticked span starts with: ``scripts/up --nodes 3`` names scripts/up,
    ``opensearch_zone: a`` names opensearch_zone."""
    word = text.split()[0] if text.split() else ""
    return word.rstrip(":,;.=")


# --- what exists -------------------------------------------------------------------------


@cache
def filter_names() -> frozenset[str]:
    return frozenset(load_plugin("filter", "clusterforge").FilterModule().filters())


def _stems(kind: str) -> set[str]:
    return {path.stem for path in (ROOT / "plugins" / kind).glob("*.py")} - {"__init__"}


@cache
def plugin_names() -> frozenset[str]:
    names = set(filter_names())
    for kind in ("action", "modules", "lookup", "strategy", "doc_fragments"):
        names |= _stems(kind)
    return frozenset(names)


@cache
def role_names() -> frozenset[str]:
    return frozenset(path.name for path in (ROOT / "roles").iterdir() if path.is_dir())


@cache
def playbook_names() -> frozenset[str]:
    return frozenset(path.stem for path in (ROOT / "playbooks").glob("*.yml"))


def _yaml_keys(path: Path) -> set[str]:
    data = yaml.safe_load(path.read_text()) if path.is_file() else None
    return set(data) if isinstance(data, dict) else set()


@cache
def variable_names() -> frozenset[str]:
    schema = load_schema()
    names = set(schema.variables)
    for inputs in schema.playbook_inputs.values():
        names |= set(inputs)
    for role in (ROOT / "roles").iterdir():
        names |= _yaml_keys(role / "defaults" / "main.yml")
        specs = (
            yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
            if (role / "meta" / "argument_specs.yml").is_file()
            else None
        )
        for entry in ((specs or {}).get("argument_specs") or {}).values():
            names |= set(entry.get("options") or {})
    return frozenset(names)


@cache
def code_words() -> frozenset[str]:
    """Every word of the code: the names it defines, sets and reads (security role names,
    the run's groups, handler topics)."""
    words: set[str] = set()
    places = [SRC, ROOT / "plugins", ROOT / "roles", ROOT / "playbooks", ROOT / "scripts"]
    places += sorted((ROOT / "services").glob("*/src"))
    for place in places:
        for path in place.rglob("*"):
            if path.is_file() and path.suffix in {".py", ".yml", ".yaml", ".j2", ""}:
                words |= set(_WORD.findall(path.read_text(errors="replace")))
    return frozenset(words)


def resolve_dotted(dotted: str) -> str | None:
    """None when ``dotted`` imports (a module, then attributes); else what is missing."""
    parts = dotted.split(".")
    module: Any = None
    index = len(parts)
    while index > 0:
        try:
            module = importlib.import_module(".".join(parts[:index]))
            break
        except ModuleNotFoundError as error:
            if error.name is None or not ".".join(parts[:index]).startswith(error.name):
                return f"importing {'.'.join(parts[:index])} failed: {error}"
            index -= 1
    if module is None:
        return f"no module {parts[0]}"
    found: Any = module
    for depth, attribute in enumerate(parts[index:], start=index):
        fields = getattr(found, "__dataclass_fields__", {})
        if attribute in fields:
            return None  # a dataclass field: it names data, not a deeper attribute
        if not hasattr(found, attribute):
            return f"{'.'.join(parts[:depth])} has no {attribute}"
        found = getattr(found, attribute)
    return None


def path_exists(text: str, page: Path) -> bool:
    """``text`` exists in the checkout; in a role's README, in that role; a role's own
    path named from another page (``meta/argument_specs.yml``), in some role; a path of a
    service's project named from a page about it (``src/clusterforge_userdir/``), in a
    service's project."""
    path = text.rstrip("/")
    if (ROOT / path).exists() or text.startswith(tuple(WRITTEN_BY_TOOLS)):
        return True
    if page.name == "README.md" and page.parent.parent.name == "roles":
        return (page.parent / path).exists()
    if text.startswith(_ROLE_DIRS):
        return any((role / path).exists() for role in (ROOT / "roles").iterdir())
    return any((project / path).exists() for project in (ROOT / "services").iterdir())


def names_a_checkout_path(word: str, page: Path) -> bool:
    if _PLACEHOLDER.search(word) or "://" in word:
        return False
    in_role = page.parent.parent.name == "roles" and word.startswith(_ROLE_DIRS)
    return word.startswith(_CHECKOUT_ROOTS) or word in _CHECKOUT_FILES or in_role


# --- the checks --------------------------------------------------------------------------


def stale_dotted(page: Path) -> list[str]:
    stale = []
    for number, line in _lines(page):
        for match in _DOTTED.finditer(line):
            dotted = match.group(1)
            name = Name(page, number, dotted)
            if dotted.startswith("clusterforge.stack") or name.excused():
                continue
            problem = resolve_dotted(dotted)
            if problem:
                stale.append(f"{name.where}: {dotted}: {problem}")
    return stale


def stale_fqcns(page: Path) -> list[str]:
    known = role_names() | plugin_names() | playbook_names()
    stale = []
    for number, line in _lines(page):
        for match in re.finditer(r"(?<![\w.])clusterforge\.stack\.(\w+)", line):
            name = Name(page, number, match.group(0))
            if match.group(1) not in known and not name.excused():
                stale.append(f"{name.where}: {match.group(0)} is no role, plugin or playbook")
    return stale


def stale_paths(page: Path) -> list[str]:
    stale = []
    for name in backticked(page):
        word = first_word(name.text)
        if not names_a_checkout_path(word, page) or Name(page, name.line, word).excused():
            continue
        if not path_exists(word, page):
            stale.append(f"{name.where}: {word} does not exist")
    return stale


def stale_links(page: Path) -> list[str]:
    stale = []
    for number, line in _lines(page):
        for match in _LINK.finditer(line):
            target = match.group(1).split("#")[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                stale.append(f"{page.relative_to(ROOT)}:{number}: link to {target} leads nowhere")
    return stale


def stale_variables(page: Path) -> list[str]:
    known = variable_names() | role_names() | code_words()
    stale = []
    for name in backticked(page):
        word = first_word(name.text)
        if not re.fullmatch(r"[a-z][a-z0-9_]*\*?", word) or not word.startswith(VARIABLE_PREFIXES):
            continue
        if word.endswith("*"):
            found = any(variable.startswith(word[:-1]) for variable in variable_names())
        else:
            found = word in known
        if not found and not Name(page, name.line, word).excused():
            stale.append(f"{name.where}: the variable {word} is declared nowhere")
    return stale


def stale_plugin_names(page: Path) -> list[str]:
    known = plugin_names() | code_words()
    stale = []
    for name in backticked(page):
        word = first_word(name.text)
        if not re.fullmatch(r"clusterforge_\w+", word):
            continue
        if word not in known and not Name(page, name.line, word).excused():
            stale.append(f"{name.where}: {word} is no plugin, filter or name of the code")
    return stale


CHECKS = (stale_dotted, stale_fqcns, stale_paths, stale_links, stale_variables, stale_plugin_names)


def stale_names(page: Path) -> list[str]:
    return [problem for check in CHECKS for problem in check(page)]


@pytest.mark.parametrize("page", doc_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_a_doc_names_only_what_exists(page: Path) -> None:
    stale = stale_names(page)
    assert not stale, "names that do not exist (fix the page):\n" + "\n".join(stale)


def test_the_pages_checked_include_every_kind_the_issue_names() -> None:
    pages = {str(page.relative_to(ROOT)) for page in doc_pages()}
    assert {"README.md", "CONTRIBUTING.md", "docs/architecture.md"} <= pages
    assert {f"roles/{role}/README.md" for role in role_names()} <= pages


def test_historical_names_are_few_and_each_has_a_reason() -> None:
    assert len(HISTORICAL) + len(WORKED_EXAMPLES) <= 10
    reasons = [*HISTORICAL.values(), *WORKED_EXAMPLES.values(), *WRITTEN_BY_TOOLS.values()]
    assert all(len(reason.split()) >= 4 for reason in reasons)


_SPHINX_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc):`~?(clusterforge[\w.]*)`")


def docstring_references() -> Iterator[tuple[str, str]]:
    """(file:line, target) of every ``:mod:`clusterforge...``` and the like in the code."""
    for place in (SRC, ROOT / "plugins"):
        for path in sorted(place.rglob("*.py")):
            for number, line in _lines(path):
                for match in _SPHINX_ROLE.finditer(line):
                    yield f"{path.relative_to(ROOT)}:{number}", match.group(1)


def test_the_codes_own_references_name_what_exists() -> None:
    # The docstrings point a reader at modules and functions the same way the pages do.
    stale = [
        f"{where}: {target}: {problem}"
        for where, target in docstring_references()
        if (problem := resolve_dotted(target))
    ]
    assert not stale, "\n".join(stale)


# --- docs/architecture.md against the tree ----------------------------------------------


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start : following if following >= 0 else len(text)]


def _table_rows(section: str) -> list[list[str]]:
    rows = []
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:]  # the header


def module_map() -> list[str]:
    """The paths the module map's first column names, relative to src/clusterforge."""
    section = _section(ARCHITECTURE.read_text(), "## Map of the modules")
    table = section[: section.index("The collection, `clusterforge.stack`")]
    return [name for row in _table_rows(table) for name in re.findall(r"`([^`]+)`", row[0])]


def plugin_table() -> list[tuple[str, str]]:
    section = _section(ARCHITECTURE.read_text(), "## Map of the modules")
    table = section[section.index("| Plugin | Kind |") :]
    table = table[: table.index("\n\n")]
    return [(row[0], row[1]) for row in _table_rows(table)]


def library_modules() -> set[str]:
    """Every module of the library (and its schema), relative to src/clusterforge."""
    modules = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"} and "templates" not in path.parts
    }
    return modules | {"schema.yml"}


def test_every_module_of_the_map_exists() -> None:
    missing = [name for name in module_map() if not (SRC / name).exists()]
    assert not missing, (
        f"docs/architecture.md's module map names what src/clusterforge lacks: {missing}"
    )


def test_every_module_of_the_library_is_in_the_map() -> None:
    listed = module_map()
    covered = {
        module
        for module in library_modules()
        if module in listed
        or any(name.endswith("/") and module.startswith(name) for name in listed)
    }
    missing = sorted(library_modules() - covered)
    assert not missing, f"add these modules to docs/architecture.md's module map: {missing}"


_KIND_DIRS = {"action": "action", "module": "modules", "lookup": "lookup", "strategy": "strategy"}
_NUMBERS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11}


def test_every_row_of_the_plugin_table_exists() -> None:
    wrong = []
    for name_cell, kind in plugin_table():
        if kind == "filter":
            count = name_cell.split()[0]
            if _NUMBERS.get(count) != len(filter_names()):
                wrong.append(f"{name_cell!r}: there are {len(filter_names())} filters")
            continue
        name = name_cell.strip("`")
        if not (ROOT / "plugins" / _KIND_DIRS[kind] / f"{name}.py").is_file():
            wrong.append(f"{name} is no {kind} (plugins/{_KIND_DIRS[kind]}/{name}.py)")
    assert not wrong, f"docs/architecture.md's plugin table: {wrong}"


def test_every_plugin_is_in_the_plugin_table() -> None:
    listed = {(name.strip("`"), kind) for name, kind in plugin_table()}
    actions = _stems("action")
    expected = {(name, "action") for name in actions}
    # A module file of an action's name only documents that action (ansible-doc).
    expected |= {(name, "module") for name in _stems("modules") - actions}
    expected |= {(name, "lookup") for name in _stems("lookup")}
    expected |= {(name, "strategy") for name in _stems("strategy")}
    missing = sorted(expected - listed)
    assert not missing, f"add these plugins to docs/architecture.md's plugin table: {missing}"
    assert any(kind == "filter" for _, kind in plugin_table())


def layout_entry(directory: str) -> str:
    """The text of the layout's entry for ``directory/`` (its continuation lines too)."""
    text = ARCHITECTURE.read_text()
    start = text.index("The rest of the checkout:")
    block_start = text.index("```", start)
    block = text[block_start + 3 : text.index("```", block_start + 3)]
    entry: list[str] = []
    for line in block.splitlines():
        if line.startswith(f"{directory}/"):
            entry = [line]
        elif entry and line.startswith(" "):
            entry.append(line)
        elif entry:
            break
    return "\n".join(entry)


def inventories() -> set[str]:
    """The inventories of the checkout: those git tracks (other tests copy scratch ones
    into inventories/ for a moment), or every directory there outside a git checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "--", "inventories"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode == 0 and listed.stdout.strip():
        return {line.split("/")[1] for line in listed.stdout.splitlines() if line.count("/") > 1}
    return {path.name for path in (ROOT / "inventories").iterdir() if path.is_dir()}


def test_the_layout_lists_every_playbook_inventory_and_script() -> None:
    missing = []
    for directory, names in (
        # The dashed names' deprecated imports are listed as a group, not by name
        # (tests/test_playbook_names.py checks them).
        ("playbooks", [p.name for p in (ROOT / "playbooks").glob("*.yml") if "-" not in p.stem]),
        ("inventories", [f"{name}/" for name in inventories()]),
        ("scripts", [path.name for path in (ROOT / "scripts").iterdir() if path.is_file()]),
    ):
        entry = layout_entry(directory)
        missing += [
            f"{directory}/{name}"
            for name in sorted(names)
            if not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", entry)
        ]
    assert not missing, f"docs/architecture.md's layout of the checkout omits {missing}"


def test_the_layout_lists_every_role() -> None:
    text = ARCHITECTURE.read_text()
    block = text[text.index("The rest of the checkout:") :]
    missing = sorted(role for role in role_names() if f"roles/{role}/" not in block)
    assert not missing, f"docs/architecture.md's layout of the checkout omits the roles {missing}"
