"""Every repository path the docs and the code's comments name exists; links hold.

Where it looks: README.md, docs/**/*.md and bench/README.md, and the docstrings
and comments of the Python under fleet_agent/, activities/, workflows/,
starter/, bench/, sidecar/, prover_image/ and worker.py. (bench/results/ is an archive of
runs as they were written, and tests/ is where the paths point, so neither is
scanned.)

What counts as a repository path: a word that starts with one of this
repository's top-level directories (a directory at the root that holds a
.py or .md file of its own: activities/, bench/, docs/, fleet_agent/, ...)
followed by a slash, not glued to anything before it. So `vastai/api/...` or
`extern/cuzk/...` (upstream sources), `/tmp/...`, `var/fleet-agent.db` and
URLs are not ours and are not checked, and neither is a path relative to a
package (`fleet/budget.py`): write it from the root to have it checked.

A path passes when it exists (a file or a directory), and otherwise when:
- it is a template: it holds `<`, `>`, `{`, `}` or a placeholder word in
  capitals of up to four letters (`bench/results/chaos-<time>.json`,
  `fleets-worker-N.log`, `YYYY-MM-DD-topic.md`);
- it is a glob (`*`) that matches at least one file (`activities/fleet*.py`);
- it ends in `…` or `...` and what comes before exists (`tests/histories/…`);
- it names a module's attribute (`starter/views/runlog.store_url`) and the
  module's file exists.

In the Markdown files, every relative link (`[text](path#anchor)`) must also
resolve from the file that holds it, and an anchor into a Markdown file must
name one of its headings (GitHub's slugs). And no commit hash is quoted in
those Markdown files: the dated files under bench/results/ may keep one.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MARKDOWN = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "bench" / "README.md",
]
PYTHON_DIRS = [
    "fleet_agent",
    "activities",
    "workflows",
    "starter",
    "bench",
    "sidecar",
    "prover_image",
]

#: A placeholder word: `N`, `PATH`, `YYYY`, standing alone in a name.
PLACEHOLDER = re.compile(r"(?<![A-Za-z])[A-Z]{1,4}(?![A-Za-z])")
#: A Markdown link's target, up to the first space or closing bracket.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def top_level_dirs(root: Path) -> list[str]:
    """The root's directories that hold a .py or .md file of their own."""
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir()
        and not p.name.startswith(".")
        and (any(p.glob("*.py")) or any(p.glob("*.md")))
    )


def path_pattern(dirs: list[str]) -> re.Pattern[str]:
    """A word that starts with one of `dirs` and a slash, glued to nothing
    before it (so `https://x/docs/a` and `vastai/docs/a` do not match)."""
    alternatives = "|".join(re.escape(d) for d in dirs)
    return re.compile(rf"(?<![\w./\-~$@:])((?:{alternatives})/[\w./\-<>*{{}}…]*)")


def python_texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each docstring line and each comment of a Python file."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                for k, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + k, line
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def scanned_texts(root: Path) -> Iterator[tuple[str, int, str]]:
    """(file, line, text) of every line the test reads for paths."""
    for md in MARKDOWN:
        for n, line in enumerate(md.read_text().splitlines(), 1):
            yield str(md.relative_to(root)), n, line
    files = [root / "worker.py"]
    for d in PYTHON_DIRS:
        files += sorted((root / d).rglob("*.py"))
    for py in files:
        for n, line in python_texts(py):
            yield str(py.relative_to(root)), n, line


def path_is_fine(root: Path, path: str) -> bool:
    """Whether a named path exists, or is one of the forms the module's
    docstring lets pass."""
    if (root / path).exists():
        return True
    if re.search(r"[<>{}]", path) or PLACEHOLDER.search(path):
        return True
    for ellipsis in ("…", "..."):
        if path.endswith(ellipsis):
            return (root / path.removesuffix(ellipsis)).exists()
    if "*" in path:
        return any(root.glob(path))
    module, dot, _attribute = path.rpartition(".")
    return bool(dot) and "/" in module and (root / f"{module}.py").is_file()


def named_paths(root: Path) -> dict[str, list[str]]:
    """Each repository path the texts name, with where it is named."""
    pattern = path_pattern(top_level_dirs(root))
    found: dict[str, list[str]] = {}
    for where, n, line in scanned_texts(root):
        for match in pattern.finditer(line):
            path = match.group(1)
            # Sentence punctuation after a path is not part of it ("see docs/X.md.").
            path = re.sub(r"(?<!\.\.)[.,:;]+$", "", path)
            found.setdefault(path, []).append(f"{where}:{n}")
    return found


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped but
    `-` and `_`, spaces to `-`."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    """The anchors of a Markdown file's headings (duplicates get -1, -2 ...)."""
    slugs: set[str] = set()
    fenced = False
    for line in markdown.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6} (.*)", line)
        if heading and not fenced:
            slug, k = github_slug(heading.group(1)), 0
            while (slug if k == 0 else f"{slug}-{k}") in slugs:
                k += 1
            slugs.add(slug if k == 0 else f"{slug}-{k}")
    return slugs


def broken_links(root: Path) -> list[str]:
    """Relative links of the scanned Markdown files that lead nowhere."""
    broken: list[str] = []
    for md in MARKDOWN:
        for n, line in enumerate(md.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):  # https:, mailto: ...
                    continue
                file_part, _, anchor = target.partition("#")
                linked = (md.parent / file_part).resolve() if file_part else md
                where = f"{md.relative_to(root)}:{n}: {target}"
                if not linked.exists():
                    broken.append(f"{where} (no such path)")
                elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                    broken.append(f"{where} (no such heading)")
    return broken


def test_the_scan_reads_the_docs_and_the_code() -> None:
    """The scan finds paths in both kinds of text (a regex that matched
    nothing would pass the test below vacuously)."""
    found = named_paths(ROOT)
    places = {where.split(":")[0] for wheres in found.values() for where in wheres}
    assert any(p.endswith(".md") for p in places)
    assert any(p.endswith(".py") for p in places)
    assert "docs/OPERATIONS.md" in found
    assert len(found) > 100


def test_every_repository_path_named_exists() -> None:
    missing = {
        path: where for path, where in named_paths(ROOT).items() if not path_is_fine(ROOT, path)
    }
    assert not missing, "paths named that do not exist:\n" + "\n".join(
        f"  {path} ({', '.join(where[:3])})" for path, where in sorted(missing.items())
    )


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = broken_links(ROOT)
    assert not broken, "links that lead nowhere:\n" + "\n".join(f"  {b}" for b in broken)


@pytest.mark.parametrize(
    ("path", "fine"),
    [
        ("docs/OPERATIONS.md", True),
        ("docs/notes-vast.md", False),
        ("bench/results/chaos-<time>.json", True),
        ("bench/results/fleets-worker-N.log", True),
        ("activities/fleet*.py", True),
        ("activities/no_such*.py", False),
        ("tests/histories/…", True),
        ("tests/no_such_dir/…", False),
        ("starter/views/runlog.store_url", True),
        ("starter/no_such_module.attribute", False),
    ],
)
def test_what_passes_as_a_path(path: str, fine: bool) -> None:
    assert path_is_fine(ROOT, path) is fine


def test_only_this_repositorys_paths_are_picked_up() -> None:
    pattern = path_pattern(top_level_dirs(ROOT))
    line = (
        "see docs/X.md, https://github.com/o/r/docs/y.md, vastai/api/instances.py, "
        "extern/cuzk/bench/z.rs, /tmp/bench/a.py, var/fleet-agent.db and `tests/t.py`."
    )
    assert [m.group(1) for m in pattern.finditer(line)] == ["docs/X.md", "tests/t.py"]


#: A commit hash as docs quote one: 7 to 40 hex digits with a letter and a
#: digit among them (so plain numbers and words such as "added" pass).
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def test_no_commit_hash_in_the_docs() -> None:
    """The docs are a manual: where a figure was measured is told by its
    dated file under bench/results/, which may quote the commit; git keeps
    the history."""
    hashes = [
        f"{md.relative_to(ROOT)}:{n}: {match.group(0)}"
        for md in MARKDOWN
        for n, line in enumerate(md.read_text().splitlines(), 1)
        for match in COMMIT_HASH.finditer(line)
    ]
    assert not hashes, "commit hashes in the docs:\n" + "\n".join(f"  {h}" for h in hashes)
