"""Static policy stage of the verifier: reads a candidate's source (never runs it) and reports
what it must not do — PyTorch compute in the forward path, reaching the reference, introspection,
threads, processes, network, native code, files, environment, patching libraries, swallowing kernel
failures, side streams, unlisted imports and dynamic lookups that hide any of these.

    result = check_policy(source)
    if not result.ok:
        print(result.summary())
"""

from __future__ import annotations

import ast
import contextlib
import sys
from collections.abc import Iterator

from kernelagent.verifier.policy import deadline
from kernelagent.verifier.policy.findings import Finding, PolicyResult, Reporter
from kernelagent.verifier.policy.forward import ForwardChecker
from kernelagent.verifier.policy.free_names import undefined_globals
from kernelagent.verifier.policy.graph import CallGraph
from kernelagent.verifier.policy.module import ModuleChecker
from kernelagent.verifier.policy.names import Resolver
from kernelagent.verifier.policy.scopes import build_module
from kernelagent.verifier.policy.tables import DESCRIPTIONS, HINTS
from kernelagent.verifier.policy.tensors import TensorFacts

__all__ = ["RULES", "RULE_DESCRIPTIONS", "Finding", "PolicyResult", "check_policy"]

RULES: tuple[str, ...] = tuple(HINTS)
RULE_DESCRIPTIONS: dict[str, str] = DESCRIPTIONS
_RECURSION_LIMIT = 10_000


def check_policy(source: str, filename: str = "kernel.py", entry_tensors: frozenset[int] | None = None,
                 time_limit: float | None = None) -> PolicyResult:
    """Check a candidate's source against the policy; `result.ok` when nothing was found. entry_tensors:
    which of the model's call arguments (by position) the reference's inputs fill with tensors, known once
    the reference has run: the entry methods' parameters there are tensors whatever their annotations or
    defaults say. time_limit: seconds after which the check stops and the file is refused (None: no limit)."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return _unparsable(source, err)
    with _recursion_headroom(_RECURSION_LIMIT), deadline.bounded(time_limit):
        try:
            return _check_tree(tree, source, filename, entry_tensors)
        except deadline.PolicyTimeout:
            report = Reporter(source)
            report.add("syntax", tree, "the policy's check of this file did not finish in the time allowed (the "
                                       "verifier's --timeout); a file this large or indirect cannot be checked")
            return report.result()


@contextlib.contextmanager
def _recursion_headroom(limit: int) -> Iterator[None]:
    """Long chains of assignments are followed recursively; make room for them, then restore."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _check_tree(tree: ast.Module, source: str, filename: str, entry_tensors: frozenset[int] | None) -> PolicyResult:
    report = Reporter(source)
    for name, node in undefined_globals(tree, source, filename).items():
        report.add("undefined_name", node, f"`{name}` is read but never imported or defined in this file")
    try:
        info = build_module(tree)
        resolver = Resolver(info)
        graph = CallGraph(info, resolver)
        tensors = TensorFacts(info, resolver, graph, entry_tensors)
        ModuleChecker(info, resolver, report).run()
        ForwardChecker(info, resolver, graph, tensors, report).run()
        if resolver.too_deep or tensors.solver.too_deep:
            report.add("dynamic_attr", tree, "names pass through too many assignments or calls to tell what "
                                             "they refer to", "suspect")
    except RecursionError:
        report.add("syntax", tree, "the code is nested too deeply to be checked; simplify it")
    except deadline.PolicyTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - what the policy cannot read, it does not pass (red team, 2026-12-05)
        report.add("syntax", tree, f"the policy could not analyse this file ({type(err).__name__}: {str(err)[:120]}); "
                                   "simplify the code around names built at run time")
    return report.result()


def _unparsable(source: str, err: Exception) -> PolicyResult:
    line = getattr(err, "lineno", None) or 1
    col = max((getattr(err, "offset", None) or 1) - 1, 0)
    lines = source.splitlines()
    snippet = lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""
    detail = getattr(err, "msg", None) or type(err).__name__
    finding = Finding("syntax", "violation", line, col, snippet, f"the file does not parse: {detail}", HINTS["syntax"])
    return PolicyResult([finding])
