"""The shape every rule has, and the registry that discovers rules in `tfcheck.rules`.

A rule is a class with a code, a name, a default severity, a docstring in the sections "What it does /
Why is this bad / Example / Use instead", examples that must and must not be flagged (run by the
tests), and a `check` method that reads FileFacts and yields Findings. Adding a rule means adding
one module to `rules/`; nothing else lists rules.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import ClassVar

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Fix, Severity


class Rule:
    """Base class of all rules."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    must_flag: ClassVar[Sequence[str]] = ()
    must_not_flag: ClassVar[Sequence[str]] = ()
    # Set when the engine itself reports the rule (parse errors), so it has no check of its own.
    reported_by_engine: ClassVar[bool] = False
    # An opt-in rule is off by default: its findings are too often not what the code's maintainer
    # wants (docs/precision.md measures each rule). Only its own code, its name or `ALL` in `select`
    # or `extend-select` turns it on; a prefix such as `TFC0` does not.
    opt_in: ClassVar[bool] = False

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        raise NotImplementedError(f"{type(self).__name__} must implement check()")

    def finding(self, facts: FileFacts, node: ast.AST, message: str, fix: Fix | None = None,
                function: FunctionInfo | None = None, severity: Severity | None = None) -> Finding:
        """A finding of this rule spanning `node`, at the rule's severity unless `severity` is given.

        With `function`, a function that is graph code only indirectly (called from graph code, traced
        by tf.data, ...) gets the reason appended, so users see why code without a decorator is flagged.
        """
        line, column, end_line, end_column = facts.span(node)
        reason = facts.graph_functions.get(function) if function is not None else None
        if reason is not None and reason != "decorated with tf.function":
            message = f"{message} [`{function.name}` is graph code: {reason}]"
        return Finding(facts.path, line, column, end_line, end_column, self.code, self.name,
                       severity or self.severity, message, fix)

    @classmethod
    def documentation(cls) -> str:
        # cleandoc, not dedent: the docstring's first line is unindented, so dedent would keep the
        # sections indented by four spaces, which Markdown renders as one code block.
        return inspect.cleandoc(cls.__doc__ or "").strip()

    @classmethod
    def summary(cls) -> str:
        """The first line of the documentation."""
        return cls.documentation().splitlines()[0] if cls.__doc__ else cls.name


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in `tfcheck.rules`, sorted by code. Imports each rule module once."""
    import tfcheck.rules as package

    found: dict[str, type[Rule]] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                if obj.code in found:
                    raise RuntimeError(f"rule code {obj.code} is defined twice: {found[obj.code]} and {obj}")
                found[obj.code] = obj
    return tuple(found[code] for code in sorted(found))


_RULE_MODULE = re.compile(r"tfc\d{3}_\w+")


@lru_cache(maxsize=1)
def rule_codes() -> frozenset[str]:
    """The code of every rule, read from the module names (`tfc001_print_in_graph`) without importing
    them: every `check` validates its selectors, and a warm run imports no rule."""
    import tfcheck.rules as package

    return frozenset(info.name[:6].upper() for info in pkgutil.iter_modules(package.__path__)
                     if _RULE_MODULE.fullmatch(info.name))


def rule_by_code(code: str) -> type[Rule] | None:
    """Look a rule up by code (`TFC001`) or name (`print-in-graph`)."""
    wanted = code.strip()
    for rule in all_rules():
        if rule.code == wanted.upper() or rule.name == wanted.lower():
            return rule
    return None


def matches(code: str, selectors: Sequence[str]) -> bool:
    """Whether a code is selected by one of `selectors`: codes or prefixes (`TFC0`, `ALL`)."""
    return any(s == "ALL" or code.startswith(s) for s in selectors)


def tier(rule: type[Rule]) -> str:
    """`default` or `opt-in`, as `tfcheck rules` shows it."""
    return "opt-in" if rule.opt_in else "default"


# Where a rule's documentation is on the web: SARIF's helpUri, the language server's codeDescription.
# The project has no public home yet (`.invalid` never resolves); when it has one, change this line.
# Editors show the documentation itself on hover, and `tfcheck explain` prints it.
DOCUMENTATION_URL = "https://tfcheck.invalid/rules/{code}"


def documentation_url(code: str) -> str:
    """The stable address of a rule's documentation (`https://tfcheck.invalid/rules/TFC001`)."""
    return DOCUMENTATION_URL.format(code=code)


def explanation(rule: type[Rule]) -> str:
    """A rule's documentation as Markdown, titled with its code, name, severity and tier: what
    `tfcheck explain` prints and what an editor shows on hover."""
    return f"# {rule.code} {rule.name} ({rule.severity.value}, {tier(rule)})\n\n{rule.documentation()}"


@lru_cache(maxsize=16)
def enabled_codes(select: tuple[str, ...], ignore: tuple[str, ...]) -> frozenset[str]:
    """The codes of the rules a run turns on: a default rule when a selector matches it, an opt-in
    rule only when named (its code, its name, or `ALL`); then `ignore` turns rules off."""
    def selected(rule: type[Rule]) -> bool:
        if rule.opt_in:
            return any(s in ("ALL", rule.code, rule.name) for s in select)
        return matches(rule.code, select) or rule.name in select
    return frozenset(rule.code for rule in all_rules() if selected(rule) and not matches(rule.code, ignore))
