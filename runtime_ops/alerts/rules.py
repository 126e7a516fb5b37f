"""Remediation rules: a small YAML file mapping alert labels to actions. Pure: no I/O beyond reading the file.

```yaml
version: 1
rules:                                  # ordered: the first rule that matches an alert decides
  - name: retrieval-quality-dropped
    match: {alertname: RetrievalQualityDropped}    # label equality (all must hold)
    match_re: {severity: "critical|page"}          # label regexes, anchored like Alertmanager's
    action: rollback                               # retrain | reembed | rollback | notify
    preapproved: false                             # rollback only: true skips the approval gate
    cooldown: 1h                                   # this rule launches at most once per hour
```

Errors name the file, the line and the rule (`rules.yaml:12: rule 2 ('stale-embeddings'): action: ...`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from runtime_ops.durations import parse_duration

Action = Literal["retrain", "reembed", "rollback", "notify"]
ACTIONS: tuple[str, ...] = ("retrain", "reembed", "rollback", "notify")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RuleFileError(ValueError):
    """The rule file cannot be used; the message names the file, the line and the rule."""


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    match: dict[str, str] = Field(default_factory=dict)
    match_re: dict[str, str] = Field(default_factory=dict)
    action: Action
    preapproved: bool = False
    batch_label: str | None = None
    cooldown: timedelta | None = None

    @field_validator("match", "match_re")
    @classmethod
    def _label_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not _LABEL.match(name):
                raise ValueError(f"{name!r} is not a label name (letters, digits and _, not starting with a digit)")
        return v

    @field_validator("match_re")
    @classmethod
    def _regexes(cls, v: dict[str, str]) -> dict[str, str]:
        for name, pattern in v.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"label {name!r}: invalid regular expression {pattern!r}: {exc}") from None
        return v

    @field_validator("preapproved")
    @classmethod
    def _preapproved(cls, v: bool, info: ValidationInfo) -> bool:
        action = info.data.get("action")
        if v and action is not None and action != "rollback":
            raise ValueError(f"preapproved applies to rollback rules only (this rule's action is {action})")
        return v

    @field_validator("batch_label")
    @classmethod
    def _batch_label(cls, v: str | None, info: ValidationInfo) -> str | None:
        action = info.data.get("action")
        if v is not None and action is not None and action != "reembed":
            raise ValueError(f"batch_label applies to reembed rules only (this rule's action is {action})")
        if v is not None and not _LABEL.match(v):
            raise ValueError(f"{v!r} is not a label name")
        return v

    @field_validator("cooldown", mode="before")
    @classmethod
    def _cooldown(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError("cooldown must be a duration such as 90s, 30m, 4h, 2d or off")
        if isinstance(v, int | float):
            return timedelta(seconds=v) if v > 0 else None
        return parse_duration(v) if isinstance(v, str) else v

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match.items()):
            return False
        return all(re.fullmatch(p, labels.get(k, "")) is not None for k, p in self.match_re.items())


class RuleSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    rules: list[Rule]

    @model_validator(mode="after")
    def _unique_names(self) -> RuleSet:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"two rules are named {rule.name!r}; rule names must be unique")
            seen.add(rule.name)
        return self

    def match(self, labels: Mapping[str, str]) -> Rule | None:
        """The first rule matching `labels`, or None (the alert is recorded as notify-only)."""
        return next((r for r in self.rules if r.matches(labels)), None)


# ---------------------------------------------------------------------------------------------- loading
def _line_of(root: yaml.Node | None, loc: Sequence[Any]) -> int:
    """The 1-based line of the deepest YAML node on the path `loc` (a pydantic error location)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else 1)
    for part in loc:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    nxt = value
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            nxt = node.value[part]
        if nxt is None:
            break
        node, line = nxt, nxt.start_mark.line + 1
    return line


def _duplicate_keys(node: yaml.Node | None) -> tuple[int, str] | None:
    """(line, key) of the first key given twice in one mapping: YAML loaders keep only the last silently."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is not None and name in seen:
                return key.start_mark.line + 1, name
            if name is not None:
                seen.add(name)
            found = _duplicate_keys(value)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found = _duplicate_keys(item)
            if found:
                return found
    return None


def _rule_label(data: Any, loc: Sequence[Any]) -> str:
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        name = None
        rules = data.get("rules") if isinstance(data, dict) else None
        if isinstance(rules, list) and loc[1] < len(rules) and isinstance(rules[loc[1]], dict):
            name = rules[loc[1]].get("name")
        return f"rule {loc[1] + 1}" + (f" ({name!r})" if isinstance(name, str) else "") + ": "
    return ""


def parse_rules(text: str, source: str = "<rules>") -> RuleSet:
    """Parse and validate a rule file's text; RuleFileError names `source`, the line and the rule."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise RuleFileError(f"{source}:{line}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise RuleFileError(f"{source}:1: a rule file is a mapping with a `rules:` list (see the example file)")
    dup = _duplicate_keys(root)
    if dup:
        raise RuleFileError(f"{source}:{dup[0]}: key {dup[1]!r} is given twice in the same mapping")
    try:
        return RuleSet.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err.get("loc") or ())
            field = ".".join(str(p) for p in loc[2:]) if loc[:1] == ("rules",) else ".".join(str(p) for p in loc)
            where = f"{field}: " if field else ""
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{source}:{_line_of(root, loc)}: {_rule_label(data, loc)}{where}{msg}")
        raise RuleFileError("\n".join(problems)) from None


def load_rules(path: str | Path) -> RuleSet:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(f"{path}: cannot read the rule file: {exc.strerror or exc}") from None
    return parse_rules(text, str(path))


EXAMPLE_RULES = Path(__file__).parent / "rules.example.yaml"
