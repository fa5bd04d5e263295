"""PyTorch's own machinery as the candidate may leave it: kernels registered over aten's, modes left on.

Two routes compute with PyTorch where the op recorder does not look (red team, 2026-12-01):
- a Python kernel registered for an aten op the recorder allows (`torch.ones_like` running `torch.softmax`):
  the recorder logs the allowed op and runs it with itself popped, so what the kernel does goes unseen;
- a TorchFunctionMode entered in the constructor and never left: it sees the verifier's own clones and
  copies of the inputs (outside any recorder) and can compute the answers there.
A third (red team, 2026-12-05): a guard that takes the Python dispatch key out of the thread's dispatch
(`torch.ExcludeDispatchKeyGuard`, `torch._C._DisableTorchDispatch`), built in the constructor and kept: every
operator then skips the recorder. The static policy refuses those names; the worker also compares the
dispatcher's thread-local key sets before and after every call with the snapshot's, so a guard left on is named
even where the policy was fooled (one entered and left inside forward is the policy's alone).
The worker takes a snapshot before the candidate is imported and names every difference afterwards; the
parent rejects them like any other run-time patch. Meta kernels are left out: they compute no data, and
PyTorch registers some lazily on first use of fake tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

_NAMESPACES = ("aten", "prim")
_IGNORED_KEYS = ("Meta",)


@dataclass(frozen=True)
class DispatchSnapshot:
    impls: frozenset[str]          # torch.library's record of Python kernels: "ns/op.overload/DispatchKey"
    tables: dict[str, str]         # the dispatcher's table of every op the recorder allows, by name
    function_modes: int            # depth of the torch-function mode stack
    dispatch_modes: int            # depth of the torch-dispatch mode stack
    tls: str                       # the dispatcher's thread-local included and excluded key sets


def _watched_ops() -> list[str]:
    """The aten/prim ops (every overload) whose dispatch the recorder allows: their kernels must be torch's."""
    import torch

    from kernelagent.verifier.oprules import ALLOWED_OPS

    return [n for n in torch._C._dispatch_get_all_op_names()
            if n.split("::")[0] in _NAMESPACES and n.split("::")[-1].split(".")[0] in ALLOWED_OPS]


def _table(name: str) -> str:
    import torch

    lines = torch._C._dispatch_dump(name).splitlines()
    return "\n".join(line for line in lines if not line.startswith(tuple(f"{k}:" for k in _IGNORED_KEYS)))


def _python_impls() -> frozenset[str]:
    import torch

    return frozenset(i for i in torch.library._impls
                     if i.split("/")[0] in _NAMESPACES and i.rsplit("/", 1)[-1] not in _IGNORED_KEYS)


def tls_keys() -> str:
    """The calling thread's locally included and excluded dispatch keys (a guard changes them while it lives)."""
    import torch

    return f"{torch._C._dispatch_tls_local_include_set()} / {torch._C._dispatch_tls_local_exclude_set()}"


def snapshot() -> DispatchSnapshot:
    """Taken before the candidate is imported (about 25 ms)."""
    import torch

    return DispatchSnapshot(_python_impls(), {n: _table(n) for n in _watched_ops()},
                            torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack(), tls_keys())


TLS_CHANGE = "the dispatcher's thread-local keys (a dispatch guard left on: operators skip the op recorder)"


def changed_since(snap: DispatchSnapshot) -> list[str]:
    """What the candidate changed in PyTorch's dispatch: kernels over aten's, modes left on the stacks."""
    import torch

    new = sorted(_python_impls() - snap.impls)
    named = {"::".join(i.split("/")[:2]) for i in new}  # "aten/ones_like/CPU" -> "aten::ones_like"
    changes = [f"the PyTorch kernel {i}" for i in new]
    changes += [f"the PyTorch kernel of {n}" for n, table in snap.tables.items()
                if n not in named and _table(n) != table]
    if torch._C._len_torch_function_stack() != snap.function_modes:
        changes.append("the torch-function mode stack (a mode left on)")
    if torch._C._len_torch_dispatch_stack() != snap.dispatch_modes:
        changes.append("the torch-dispatch mode stack (a mode left on)")
    if tls_keys() != snap.tls:
        changes.append(TLS_CHANGE)
    return changes
