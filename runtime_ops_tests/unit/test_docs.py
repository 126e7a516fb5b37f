"""The README and the pages under docs/ tell the truth about the checkout they are in.

- every relative link (and image) resolves to a file or folder of the repository, and every `#anchor` to a heading
  of the page it names (GitHub's slugs); so does every repository path named in inline code without a link;
- every `runtime-ops <command> [<subcommand>] [--option]` they name, in code, is one the CLI's argparse parser has;
- every `make <target>` they name, in code, is a target of the Makefile;
- every `RUNTIME_OPS_*` variable they name is a field of the settings model, or is listed in docs/settings.md's
  "Read elsewhere" table beside the file that reads it (and that file does name it);
- no fenced shell block calls a bare `runtime-ops`: after `make dev` it is not on PATH, so a reader who copies
  the block runs `.venv/bin/runtime-ops` (or the block first runs `source .venv/bin/activate`).

A failure names `file:line` and the broken reference, one per line.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import AliasChoices

from runtime_ops.cli import build_parser
from runtime_ops.settings import Settings


def _repository_root() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file() and (folder / "README.md").is_file():
            return folder
    raise AssertionError(f"no repository root (pyproject.toml + README.md) above {__file__}")


ROOT = _repository_root()
SHELL_LANGUAGES = {"bash", "sh", "shell", "console", "zsh"}
READ_ELSEWHERE_HEADING = "Read elsewhere"


@dataclass(frozen=True)
class Code:
    """A piece of code on a page: an inline span or one line of a fenced block (`language` is the fence's)."""

    line: int
    text: str
    fenced: bool
    language: str


@dataclass
class Page:
    path: Path
    lines: list[str]
    prose: list[tuple[int, str]]  # lines outside fences, inline code blanked out
    code: list[Code]
    blocks: list[tuple[int, str, list[str]]]  # fenced blocks: first line number, language, lines
    anchors: set[str]

    @property
    def name(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def read_page(path: Path) -> Page:
    lines = path.read_text(encoding="utf-8").splitlines()
    prose: list[tuple[int, str]] = []
    code: list[Code] = []
    blocks: list[tuple[int, str, list[str]]] = []
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[3:].strip().split(" ")[0].lower()
            blocks.append((number + 1, fence, []))
            continue
        if fence is not None:
            if stripped.startswith("```"):
                fence = None
            else:
                blocks[-1][2].append(line)
                code.append(Code(number, line, True, fence))
            continue
        for span in re.finditer(r"(`+)(.+?)\1", line):
            code.append(Code(number, span.group(2), False, ""))
        prose.append((number, re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)))
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
    return Page(path, lines, prose, code, blocks, anchors)


def documentation_pages() -> list[Page]:
    return [read_page(ROOT / "README.md"), *(read_page(p) for p in sorted((ROOT / "docs").glob("*.md")))]


@pytest.fixture(scope="module")
def pages() -> list[Page]:
    return documentation_pages()


def _report(problems: list[str]) -> str:
    return f"{len(problems)} broken reference(s) in README.md / docs/:\n  " + "\n  ".join(problems)


# --- links ----------------------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def link_problems(pages: list[Page]) -> list[str]:
    by_path = {p.path.resolve(): p for p in pages}
    problems: list[str] = []
    for page in pages:
        for number, text in page.prose:
            for match in LINK.finditer(text):
                target = match.group(1)
                if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:, ...
                    continue
                where = f"{page.name}:{number}: link {target!r}"
                path_part, _, anchor = target.partition("#")
                if not path_part:  # a heading of this page
                    if anchor not in page.anchors:
                        problems.append(f"{where}: {page.name} has no heading with the anchor #{anchor}")
                    continue
                resolved = (page.path.parent / path_part).resolve()
                if not resolved.is_relative_to(ROOT):
                    problems.append(f"{where}: points outside the repository")
                    continue
                if not resolved.exists():
                    problems.append(f"{where}: no such file or folder ({resolved.relative_to(ROOT)})")
                    continue
                if not anchor:
                    continue
                if resolved.suffix == ".md":
                    linked = by_path.get(resolved) or read_page(resolved)
                    if anchor not in linked.anchors:
                        problems.append(f"{where}: {linked.name} has no heading with the anchor #{anchor}")
                elif not re.fullmatch(r"L\d+(-L\d+)?", anchor):
                    problems.append(f"{where}: #{anchor} is neither a line (#L12) nor a heading of a page")
    return problems


def test_every_relative_link_and_anchor_resolves(pages: list[Page]) -> None:
    problems = link_problems(pages)
    assert not problems, _report(problems)


# A repository path named in inline code without a link (`runtime_ops/store/schema.py`): a file of one of the
# project's folders, with its extension (run tags such as `runtime_ops/pipeline` have none), or a folder (`.../`).
NAMED_PATH = re.compile(r"(?:runtime_ops|runtime_ops_tests|bench|docker|deploy|docs)/(?:[\w.-]+/)*(?:[\w-]+\.\w+)?")


def named_path_problems(pages: list[Page]) -> list[str]:
    problems: list[str] = []
    for page in pages:
        for code in page.code:
            if code.fenced or not NAMED_PATH.fullmatch(code.text):
                continue
            if not (ROOT / code.text).exists():
                problems.append(f"{page.name}:{code.line}: `{code.text}`: no such file or folder in the repository")
    return problems


def test_every_repository_path_named_exists(pages: list[Page]) -> None:
    problems = named_path_problems(pages)
    assert not problems, _report(problems)


# --- runtime-ops commands -------------------------------------------------------------------------------------

# `runtime-ops` as a command, not as a name: not the namespace of `kubectl -n runtime-ops`, not part of
# `runtime-ops-api` or the image `runtime-ops:latest`.
COMMAND = re.compile(r"(?<![\w./:-])(?:\.venv/bin/)?runtime-ops(?![\w.:/-])")
NOT_A_COMMAND_AFTER = {"-n", "--namespace", "namespace"}
END_OF_COMMAND = re.compile(r"\s(?:#|\|\|?|&&|;|>|2>)|[)`\"']|$")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def command_problem(words: list[str], parser: argparse.ArgumentParser) -> str | None:
    """What is wrong with `runtime-ops <words>`, or None: each command word must be a subcommand of the parser
    before it, each `--option` one of the innermost parser's. Placeholders (`ID`, `[--as WHO]`, `...`) pass."""
    command = ["runtime-ops"]
    for word in words:
        bare = word.strip("[]{}")
        if bare.startswith("--"):
            option = bare.split("=", 1)[0].rstrip(".,;:")
            if option not in _options(parser):
                return f"`{' '.join(command)}` has no option {option}"
            continue
        choices = _subcommands(parser)
        if not choices or not re.fullmatch(r"[a-z][a-z0-9-]*", bare) or bare != word:
            continue
        if bare not in choices:
            return f"`{' '.join(command)}` has no command {bare!r} (it has: {', '.join(sorted(choices))})"
        parser = choices[bare]
        command.append(bare)
    return None


def named_commands(page: Page) -> Iterator[tuple[int, list[str]]]:
    """Each `runtime-ops ...` named in code on the page (inline spans; fenced shell blocks), with the words after
    it up to the end of that command."""
    for code in page.code:
        if code.fenced and code.language not in SHELL_LANGUAGES:
            continue
        for match in COMMAND.finditer(code.text):
            before = code.text[: match.start()].split()
            if before and before[-1] in NOT_A_COMMAND_AFTER:
                continue
            rest = code.text[match.end() :]
            end = END_OF_COMMAND.search(rest)
            yield code.line, rest[: end.start() if end else len(rest)].split()


def command_problems(pages: list[Page]) -> list[str]:
    parser = build_parser()
    problems: list[str] = []
    for page in pages:
        for number, words in named_commands(page):
            problem = command_problem(words, parser)
            if problem:
                problems.append(f"{page.name}:{number}: `runtime-ops {' '.join(words)}`: {problem}")
    return problems


def test_every_runtime_ops_command_named_is_one_the_cli_has(pages: list[Page]) -> None:
    problems = command_problems(pages)
    assert not problems, _report(problems)


# A bare `runtime-ops` where a shell would look it up on PATH: at the start of a command (after any VAR=value),
# after `$(`, a pipe, `;`, `&&` or `||`.
BARE_CALL = re.compile(r"(?:^|&&|\|\|?|[;(`])\s*(?:[A-Za-z_]\w*=\S*\s+)*runtime-ops(?![\w.:/-])")
ACTIVATE = re.compile(r"(?:^|\s)(?:source|\.)\s+\.venv/bin/activate\b")


def bare_call_problems(pages: list[Page]) -> list[str]:
    problems: list[str] = []
    for page in pages:
        for first, language, lines in page.blocks:
            if language not in SHELL_LANGUAGES:
                continue
            activated = False
            for offset, line in enumerate(lines):
                command = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
                if ACTIVATE.search(command):
                    activated = True
                if not activated and BARE_CALL.search(command):
                    problems.append(
                        f"{page.name}:{first + offset}: a bare `runtime-ops` is not on PATH after `make dev`: "
                        f"write `.venv/bin/runtime-ops` (or `source .venv/bin/activate` first): {line.strip()}"
                    )
    return problems


def test_no_shell_block_calls_a_bare_runtime_ops(pages: list[Page]) -> None:
    problems = bare_call_problems(pages)
    assert not problems, _report(problems)


# --- make targets ---------------------------------------------------------------------------------------------


def makefile_targets() -> set[str]:
    targets: set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        rule = re.match(r"([A-Za-z][\w.-]*(?:[ \t]+[A-Za-z][\w.-]*)*)[ \t]*:(?![:=])", line)
        if rule and not line.startswith("\t"):
            targets.update(rule.group(1).split())
    return targets - {".PHONY"}


def make_problems(pages: list[Page]) -> list[str]:
    targets = makefile_targets()
    problems: list[str] = []
    for page in pages:
        for code in page.code:
            if code.fenced and code.language not in SHELL_LANGUAGES:
                continue
            for match in re.finditer(r"(?<![\w-])make((?:[ \t]+[A-Z_]\w*=\S*)*)[ \t]+([a-z][\w-]*)", code.text):
                if match.group(2) not in targets:
                    problems.append(
                        f"{page.name}:{code.line}: `make {match.group(2)}`: no such target in the Makefile "
                        f"(it has: {', '.join(sorted(targets))})"
                    )
    return problems


def test_every_make_target_named_exists(pages: list[Page]) -> None:
    problems = make_problems(pages)
    assert not problems, _report(problems)


# --- environment variables ------------------------------------------------------------------------------------

VARIABLE = re.compile(r"(?<![\w$])RUNTIME_OPS_[A-Z0-9_]*[A-Z0-9](?![\w])")


def settings_variables() -> set[str]:
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
        else:
            names.add(alias if isinstance(alias, str) else name.upper())
    return names


def read_elsewhere(settings_page: Page) -> tuple[dict[str, Path], list[str]]:
    """The variables docs/settings.md lists under "Read elsewhere": `| `VAR` | [file](link) | ... |`, each with
    the file that reads it; a row whose file does not name its variable is a problem."""
    found: dict[str, Path] = {}
    problems: list[str] = []
    section = False
    for number, line in enumerate(settings_page.lines, start=1):
        if line.startswith("#"):
            section = line.lstrip("#").strip() == READ_ELSEWHERE_HEADING
            continue
        row = re.match(r"\|\s*`(RUNTIME_OPS_\w+)`\s*\|\s*\[[^\]]*\]\(([^)#]+)\)", line) if section else None
        if not row:
            continue
        variable, target = row.groups()
        source = (settings_page.path.parent / target).resolve()
        if not source.is_file() or variable not in source.read_text(encoding="utf-8", errors="replace"):
            problems.append(f"{settings_page.name}:{number}: {variable} is not read in {target}")
        found[variable] = source
    return found, problems


def variable_problems(pages: list[Page]) -> list[str]:
    settings_page = next(p for p in pages if p.path == ROOT / "docs" / "settings.md")
    elsewhere, problems = read_elsewhere(settings_page)
    known = settings_variables() | set(elsewhere)
    for page in pages:
        for number, line in enumerate(page.lines, start=1):
            for variable in VARIABLE.findall(line):
                if variable not in known:
                    problems.append(
                        f"{page.name}:{number}: {variable} is not a setting (runtime_ops/settings.py) nor listed "
                        f"under '{READ_ELSEWHERE_HEADING}' in docs/settings.md"
                    )
    return problems


def test_every_runtime_ops_variable_named_is_a_setting_or_read_elsewhere(pages: list[Page]) -> None:
    problems = variable_problems(pages)
    assert not problems, _report(problems)


# --- the checks themselves ------------------------------------------------------------------------------------


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """A page with one of each mistake: each check names it with its line (so a check that silently matches
    nothing cannot pass the real pages)."""
    page_path = ROOT / "docs" / "settings.md"
    broken = read_page(page_path)
    text = "\n".join(
        [
            "# A page",
            "[gone](no/such/file.md) and [anchor](#no-such-heading) and [fine](#a-page)",
            "`runtime-ops approvals approov ID` and `runtime-ops keys create x --scoop read`",
            "`make tset`, RUNTIME_OPS_NO_SUCH_SETTING, `runtime_ops/no_such_module.py`, tag `runtime_ops/pipeline`",
            "```bash",
            "KEY=$(runtime-ops keys create my-app --scope search)",
            "```",
        ]
    )
    sample = tmp_path / "sample.md"
    sample.write_text(text)
    page = read_page(sample)
    page.path = ROOT / "docs" / "sample.md"  # as if it were a page of docs/, for relative links and names
    assert [p.split(": ")[0] for p in link_problems([page])] == ["docs/sample.md:2", "docs/sample.md:2"]
    assert [p.split(": ")[0] for p in command_problems([page])] == ["docs/sample.md:3", "docs/sample.md:3"]
    assert [p.split(": ")[0] for p in make_problems([page])] == ["docs/sample.md:4"]
    assert [p.split(": ")[0] for p in named_path_problems([page])] == ["docs/sample.md:4"]
    assert [p.split(": ")[0] for p in bare_call_problems([page])] == ["docs/sample.md:6"]
    assert [p.split(": ")[0] for p in variable_problems([broken, page])] == ["docs/sample.md:4"]


def test_the_readme_names_every_pipeline_make_dev_runs() -> None:
    """A newcomer meets each built-in pipeline's approval link on the `make dev` console: the README says what it
    is, linking its defs.yaml."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    declared = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "runtime_ops" / "defs").glob("*/defs.yaml"))
    assert declared, "no built-in pipeline found"
    assert [path for path in declared if f"]({path})" not in readme] == []
