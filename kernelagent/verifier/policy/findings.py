"""Findings of the static policy and the result object the verifier reads."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelagent.verifier.policy.tables import HINTS

SNIPPET_MAX = 160
_COMPOUND = (
    ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef,
    ast.For, ast.AsyncFor, ast.If, ast.While,
)


@dataclass
class Finding:
    """One thing the policy found: which rule, where, and what the author should do instead."""

    rule: str
    severity: str  # "violation" | "suspect"
    line: int
    col: int
    snippet: str
    message: str
    hint: str


@dataclass
class PolicyResult:
    """All findings for one candidate; `ok` only when there are none."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "violation"]

    @property
    def suspects(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "suspect"]

    @property
    def ok(self) -> bool:
        return not self.findings

    def rules(self) -> set[str]:
        return {f.rule for f in self.findings}

    def summary(self) -> str:
        """One line per finding: `line 12 [torch_compute] what was found: what to do instead`."""
        if not self.findings:
            return "no policy findings"
        lines = []
        for f in self.findings:
            tag = f.rule if f.severity == "violation" else f"{f.rule}, unverifiable"
            lines.append(f"line {f.line} [{tag}] {f.message}: {f.hint}")
        return "\n".join(lines)


class Reporter:
    """Collects findings with snippets taken from the source; one finding per rule and line."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int]] = set()

    def add(self, rule: str, node: ast.AST, message: str, severity: str = "violation") -> None:
        line = getattr(node, "lineno", 1) or 1
        if (rule, line) in self._seen:
            return
        self._seen.add((rule, line))
        col = getattr(node, "col_offset", 0) or 0
        self.findings.append(Finding(
            rule=rule, severity=severity, line=line, col=col, snippet=self.snippet(node),
            message=message, hint=HINTS[rule],
        ))

    def snippet(self, node: ast.AST) -> str:
        start = getattr(node, "lineno", 1) or 1
        end = start if isinstance(node, _COMPOUND) else (getattr(node, "end_lineno", start) or start)
        text = " ".join(line.strip() for line in self.lines[start - 1:min(end, start + 2)])
        return text if len(text) <= SNIPPET_MAX else text[:SNIPPET_MAX - 3] + "..."

    def result(self) -> PolicyResult:
        return PolicyResult(sorted(self.findings, key=lambda f: (f.line, f.col, f.rule)))


def short(node: ast.AST, limit: int = 60) -> str:
    """Source text of a node, shortened for messages."""
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
