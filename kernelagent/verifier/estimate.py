"""How much memory and time a problem will cost the audit and the verifier, known before anything runs.

A problem is sized as bytes of its inputs, parameters, outputs and the most one forward holds at once,
each in its own dtypes and upcast to float64 (`Sizes`). The estimators below are pure functions of those
sizes; a refusal names the size, the estimate and what the machine has free, so a problem too large for
the machine is turned away up front instead of a process being killed half way.

`static_sizes` reads a problem's `get_inputs()` from its source alone (the parent never imports a
problem): module-level numbers and `torch.randn(...)`-style factories, the KernelBench pattern. Anything it
cannot follow gives None, and the caller then relies on the workers' own memory watchdogs.
Machine readings (`read_machine`, `oom_kill_count`) are the only functions here that look outside.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelagent.problem import ProblemSpec
    from kernelagent.verifier.options import VerifyOptions

MB = 2**20
GB = 2**30
HOST_BASE_CPU = 600 * MB        # a worker with torch imported, before any tensor (measured ~450 MB)
HOST_BASE_CUDA = 3 * GB         # ... with a CUDA context and cuBLAS/cuDNN loaded (2-3 GB resident)
DEVICE_BASE = 1 * GB            # a CUDA context, cuBLAS/cuDNN workspaces
COMPARE_CHUNK = 1 << 22         # elements the audit compares at once (float64 temporaries: ~6 per element)
JUDGE_F64_COPIES = 8            # float64 copies of an output the verifier's judge holds while comparing
INTERPRETER_ELEMENTS_PER_S = 2e6  # Triton interpreter on one core: 0.4-3e6 elements/s measured, blocks 1-8K
CPU_CALLS_PER_TRIAL = 1         # candidate forwards per correctness trial on CPU ...
CPU_EXTRA_CALLS = 4             # ... plus repeat, sentinel and the two-call cache probe
HOST_HEADROOM = 0.9             # never plan to use more than this share of what is free

_FLOAT_BYTES = {"float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
                "complex64": 8, "complex128": 16, "cfloat": 8, "cdouble": 16}
_INT_BYTES = {"int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1, "uint8": 1,
              "bool": 1}


@dataclass(frozen=True)
class Bytes:
    """One category's bytes in its own dtypes (`native`) and with floats upcast to float64 (`f64`)."""

    native: int = 0
    f64: int = 0

    def __add__(self, other: Bytes) -> Bytes:
        return Bytes(self.native + other.native, self.f64 + other.f64)

    @staticmethod
    def of(elements: int, itemsize: int, is_float: bool) -> Bytes:
        wide = max(8, itemsize) if is_float else itemsize  # complex64 is counted as float64: rare
        return Bytes(elements * itemsize, elements * wide)


@dataclass(frozen=True)
class Sizes:
    """A problem's size: what one input set, the parameters, the outputs and one forward take."""

    inputs: Bytes
    params: Bytes = Bytes()
    outputs: Bytes = Bytes()
    forward: Bytes = Bytes()     # the most one forward holds beyond inputs and parameters (outputs included)
    elements: int = 0            # elements of the main input set
    source: str = "static"       # meta | cpu | static | rough: how the sizes were found

    def to_dict(self) -> dict[str, object]:
        cat = {k: {"native": v.native, "f64": v.f64} for k, v in
               (("inputs", self.inputs), ("params", self.params), ("outputs", self.outputs), ("forward", self.forward))}
        return {**cat, "elements": self.elements, "source": self.source}

    @staticmethod
    def from_dict(d: dict) -> Sizes:
        get = lambda k: Bytes(int(d[k]["native"]), int(d[k]["f64"]))  # noqa: E731
        return Sizes(get("inputs"), get("params"), get("outputs"), get("forward"), int(d["elements"]),
                     str(d["source"]))


@dataclass(frozen=True)
class Estimate:
    """Peak bytes on the host and on the device, and the largest terms, for the message."""

    host: int
    device: int = 0
    parts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"host_bytes": self.host, "device_bytes": self.device, "parts": dict(self.parts)}


@dataclass(frozen=True)
class Machine:
    """What this machine has free now (bytes); None where it could not be read."""

    host_available: int
    host_total: int
    shm_available: int | None = None
    device_total: int | None = None
    device_free: int | None = None


# ------------------------------------------------------------------------------------------- estimates


def audit_peak(s: Sizes, device: str, float64: bool) -> Estimate:
    """The audit's peak: model, a second model (parameters varied), one input draw and its clone, the first
    draw's output kept, one more output, one trivial answer, a compare chunk; with `float64`, the float64
    model, inputs, output and forward too."""
    out_elems = s.outputs.f64 // 8
    chunk = min(out_elems, COMPARE_CHUNK) * 8 * 6
    parts = {"parameters (2 models)": 2 * s.params.native, "inputs (draw + clone)": 2 * s.inputs.native,
             "outputs kept": 3 * s.outputs.native, "forward": s.forward.native, "comparison": chunk}
    if float64:
        parts.update({"float64 model": s.params.f64, "float64 inputs": s.inputs.f64,
                      "float64 output": s.outputs.f64, "float64 forward": s.forward.f64})
    total = sum(parts.values())
    if device == "cuda":
        return Estimate(host=HOST_BASE_CUDA, device=total + DEVICE_BASE, parts=parts)
    return Estimate(host=total + HOST_BASE_CPU, parts=parts)


def verifier_peak(s: Sizes, trials: int, device: str, timing_trials: int = 0, backward: bool = False) -> Estimate:
    """The verifier's peak for `trials` correctness trials (+ `timing_trials` on a GPU): the reference pack
    (inputs, outputs, float64 outputs of every trial) lives in host memory (/dev/shm) for the whole run; on
    top of it the largest of the reference worker, the candidate worker and the judge (which holds about
    JUDGE_F64_COPIES float64 copies of an output while comparing)."""
    t = trials + timing_trials
    grads = (s.inputs + s.params) if backward else Bytes()
    pack = t * (s.inputs.native + s.outputs.native + s.outputs.f64 + grads.native + grads.f64)
    reference = s.params.native + s.params.f64 + s.inputs.native + s.inputs.f64 + s.forward.native + s.forward.f64
    candidate = s.params.native + t * s.inputs.native + s.forward.native
    cand_outputs = (t + CPU_EXTRA_CALLS) * s.outputs.native
    judge = s.outputs.native * 2 + s.outputs.f64 * (1 + JUDGE_F64_COPIES)
    parts = {"reference pack": pack, "candidate outputs": cand_outputs, "judge": judge}
    if device == "cuda":
        on_device = max(reference, candidate) + DEVICE_BASE
        parts["reference worker (device)"] = reference
        return Estimate(host=pack + cand_outputs + judge + 2 * HOST_BASE_CUDA, device=on_device, parts=parts)
    parts["reference worker"] = reference
    parts["candidate worker"] = candidate
    host = pack + max(reference, candidate + cand_outputs, judge + cand_outputs) + 2 * HOST_BASE_CPU
    return Estimate(host=host, parts=parts)


def cpu_verify_seconds(elements: int, trials: int) -> float:
    """Seconds the Triton interpreter needs for a candidate over `elements` input elements per call."""
    calls = trials * CPU_CALLS_PER_TRIAL + CPU_EXTRA_CALLS
    return elements * calls / INTERPRETER_ELEMENTS_PER_S


def memory_refusal(est: Estimate, machine: Machine, what: str, sizes: Sizes | None = None) -> str | None:
    """A one-paragraph refusal when the estimate does not fit what the machine has free, else None."""
    size = f" ({describe(sizes)})" if sizes is not None else ""
    host_free = machine.host_available
    if est.host > host_free * HOST_HEADROOM:
        return (f"{what} needs about {fmt_bytes(est.host)} of host memory{size}, {_largest(est)}; this machine has "
                f"{fmt_bytes(host_free)} free: make get_inputs() smaller, or run it on a larger machine")
    if est.device and machine.device_total is not None:
        room = machine.device_free if machine.device_free is not None else machine.device_total
        if est.device > room * HOST_HEADROOM:
            return (f"{what} needs about {fmt_bytes(est.device)} of GPU memory{size}, {_largest(est)}; the GPU has "
                    f"{fmt_bytes(room)} free: make get_inputs() smaller")
    return None


def time_refusal(elements: int, trials: int, timeout: float, cap: int) -> str | None:
    """On CPU, a refusal when the Triton interpreter could not get through the smallest input set in time."""
    seconds = cpu_verify_seconds(elements, trials)
    if seconds <= timeout:
        return None
    calls = trials * CPU_CALLS_PER_TRIAL + CPU_EXTRA_CALLS
    return (f"on CPU the smallest input set has {elements:,} elements; the Triton interpreter checks about "
            f"{INTERPRETER_ELEMENTS_PER_S:.0e} elements a second, so the {calls} calls verification makes would take "
            f"about {seconds:,.0f} s, past the {timeout:.0f} s limit: verify on "
            f"a GPU, or add a get_test_inputs() set under {cap:,} elements (the CPU path checks those instead)")


def check_verify(sizes: Sizes, *, device: str, seeds: int, timeout: float, cpu_max_elements: int,
                 has_test_inputs: bool, backward: bool, machine: Machine) -> str | None:
    """Whether verifying a problem of these sizes would run out of time (CPU) or memory: a refusal or None."""
    if device == "cpu" and sizes.elements > cpu_max_elements:
        if has_test_inputs:
            return None  # the CPU path checks the (smaller) test sets instead of the main one
        late = time_refusal(sizes.elements, seeds, timeout, cpu_max_elements)
        if late:
            return late
    timing = 3 if device == "cuda" else 0
    est = verifier_peak(sizes, seeds, device, timing, backward)
    return memory_refusal(est, machine, "verifying this problem", sizes)


def refuse_verify(spec: ProblemSpec, options: VerifyOptions, device: str) -> str | None:
    """The verifier's one call, before any worker starts: size the problem from its source (a problem the
    static reader cannot follow is let through) and check it against this machine."""
    sizes = static_sizes(spec.source)
    if sizes is None:
        return None
    return check_verify(sizes, device=device, seeds=max(1, options.seeds), timeout=options.timeout,
                        cpu_max_elements=options.cpu_max_elements, has_test_inputs=spec.has_test_inputs,
                        backward=spec.backward, machine=read_machine(device, gpu_free=False))


def describe(s: Sizes) -> str:
    parts = [f"inputs {fmt_bytes(s.inputs.native)}"]
    if s.params.native:
        parts.append(f"parameters {fmt_bytes(s.params.native)}")
    if s.outputs.native and s.source != "static":
        parts.append(f"outputs {fmt_bytes(s.outputs.native)}")
    return ", ".join(parts)


def _largest(est: Estimate) -> str:
    top = sorted(((v, k) for k, v in est.parts.items() if v), reverse=True)[:2]
    return "mostly " + " and ".join(f"{k} {fmt_bytes(v)}" for v, k in top) if top else "in all"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", GB), ("MB", MB), ("KB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


# ------------------------------------------------------------------------------------------- static sizing


class _Unknown(Exception):
    """The static reader met something it does not follow."""


@dataclass(frozen=True)
class _T:
    """A tensor the static reader built: element count, element size, float or not."""

    numel: int
    itemsize: int = 4
    is_float: bool = True


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod}
_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "randint", "full", "arange", "tensor", "randperm"}
_SAME_SIZE = {"cuda", "cpu", "to", "contiguous", "clone", "detach", "requires_grad_", "abs", "exp", "sigmoid",
              "tanh", "relu", "softmax", "log_softmax", "clamp", "clamp_", "mul", "mul_", "add", "add_", "sub", "div",
              "neg", "sign", "normal_", "uniform_", "fill_", "zero_", "t", "T", "mT", "transpose", "permute"}
_CASTS = {"float": ("float32", 4, True), "double": ("float64", 8, True), "half": ("float16", 2, True),
          "bfloat16": ("bfloat16", 2, True), "long": ("int64", 8, False), "int": ("int32", 4, False),
          "bool": ("bool", 1, False)}


def static_sizes(source: str) -> Sizes | None:
    """The main input set's size read from `get_inputs()` without running anything, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    consts = _module_constants(tree)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return None
    try:
        tensors = _inputs_of(fn, consts)
    except (_Unknown, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    inputs = Bytes()
    for t in tensors:
        inputs = inputs + Bytes.of(t.numel, t.itemsize, t.is_float)
    largest = max((Bytes.of(t.numel, t.itemsize, t.is_float) for t in tensors), key=lambda b: b.native,
                  default=Bytes())
    # outputs and the forward are not in the source: assume the output is as large as the largest input
    return Sizes(inputs=inputs, outputs=largest, forward=largest, elements=sum(t.numel for t in tensors),
                 source="static")


def _module_constants(tree: ast.Module) -> dict[str, object]:
    consts: dict[str, object] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        try:
            value = _eval(node.value, consts)
        except (_Unknown, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
            continue
        for target in node.targets:
            _bind(target, value, consts)
    return consts


def _bind(target: ast.expr, value: object, scope: dict[str, object]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)) \
            and len(target.elts) == len(value):
        for t, v in zip(target.elts, value, strict=True):
            _bind(t, v, scope)


def _inputs_of(fn: ast.FunctionDef, consts: dict[str, object]) -> list[_T]:
    scope = dict(consts)
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        if isinstance(stmt, ast.Assign):
            value = _eval(stmt.value, scope)
            for target in stmt.targets:
                _bind(target, value, scope)
            continue
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            value = _eval(stmt.value, scope)
            if not isinstance(value, (list, tuple)):
                raise _Unknown("get_inputs returns something else")
            return [v for v in value if isinstance(v, _T)]
        raise _Unknown(type(stmt).__name__)
    raise _Unknown("no return")


def _eval(node: ast.expr, scope: dict[str, object]) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        raise _Unknown(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        out: list[object] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(_seq(_eval(e.value, scope)))
            else:
                out.append(_eval(e, scope))
        return tuple(out) if isinstance(node, ast.Tuple) else out
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _binop(node, scope)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _eval(node.operand, scope)
        return -v if isinstance(v, (int, float)) else v
    if isinstance(node, ast.Call):
        return _call(node, scope)
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        return _eval(node.value, scope)
    raise _Unknown(type(node).__name__)


def _binop(node: ast.BinOp, scope: dict[str, object]) -> object:
    a, b = _eval(node.left, scope), _eval(node.right, scope)
    if isinstance(a, _T) or isinstance(b, _T):  # elementwise on tensors: the larger operand's size
        ts = [x for x in (a, b) if isinstance(x, _T)]
        return max(ts, key=lambda t: t.numel)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and isinstance(node.op, ast.Add):
        return type(a)([*a, *b])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if isinstance(node.op, ast.Pow) and abs(b) > 64:
            raise _Unknown("huge power")
        return _BINOPS[type(node.op)](a, b)
    raise _Unknown("operands")


def _seq(v: object) -> list[object]:
    if isinstance(v, (tuple, list)):
        return list(v)
    raise _Unknown("not a sequence")


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call, scope: dict[str, object]) -> object:
    name = _dotted(node.func)
    if name.startswith("torch.") and name.count(".") == 1 and name.split(".")[1] in _FACTORIES:
        return _factory(name.split(".")[1], node, scope)
    if name.startswith("torch.") and name.split(".")[-1] in _SAME_SIZE | {"triu", "tril"} and node.args:
        first = _eval(node.args[0], scope)
        if isinstance(first, _T):
            return first
    if isinstance(node.func, ast.Attribute):
        base = _eval(node.func.value, scope)
        if isinstance(base, _T):
            return _method(base, node, scope)
    if name in ("int", "float", "max", "min", "round", "math.prod", "math.ceil", "math.floor"):
        args = [_eval(a, scope) for a in node.args]
        fns = {"int": int, "float": float, "max": max, "min": min, "round": round, "math.prod": math.prod,
               "math.ceil": math.ceil, "math.floor": math.floor}
        return fns[name](*args)
    raise _Unknown(name or "call")


def _shape(args: list[object]) -> int:
    dims = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise _Unknown("shape")
    return math.prod(dims)


def _dtype(node: ast.Call, scope: dict[str, object], default: tuple[int, bool]) -> tuple[int, bool]:
    for kw in node.keywords:
        if kw.arg == "dtype":
            name = _dotted(kw.value).removeprefix("torch.")
            if name in _FLOAT_BYTES:
                return _FLOAT_BYTES[name], True
            if name in _INT_BYTES:
                return _INT_BYTES[name], False
            raise _Unknown("dtype")
    return default


def _factory(kind: str, node: ast.Call, scope: dict[str, object]) -> _T:
    args = list(_seq(_eval(ast.Tuple(elts=node.args, ctx=ast.Load()), scope)))  # *shape unpacked
    size_kw = next((kw.value for kw in node.keywords if kw.arg == "size"), None)
    if kind == "randint":
        shape = _eval(size_kw, scope) if size_kw is not None else args[-1]
        itemsize, is_float = _dtype(node, scope, (8, False))
        return _T(_shape([shape]), itemsize, is_float)
    if kind == "full":
        itemsize, is_float = _dtype(node, scope, (4, True))
        return _T(_shape([args[0]]), itemsize, is_float)
    if kind in ("tensor", "arange", "randperm"):
        raise _Unknown(kind)
    shape_args = [_eval(size_kw, scope)] if size_kw is not None else args
    itemsize, is_float = _dtype(node, scope, (4, True))
    return _T(_shape(shape_args), itemsize, is_float)


def _method(base: _T, node: ast.Call, scope: dict[str, object]) -> _T:
    name = node.func.attr  # type: ignore[union-attr]
    if name in _CASTS:
        _, itemsize, is_float = _CASTS[name]
        return _T(base.numel, itemsize, is_float)
    if name == "to":
        for a in [*node.args, *(kw.value for kw in node.keywords if kw.arg == "dtype")]:
            dt = _dotted(a).removeprefix("torch.")
            if dt in _FLOAT_BYTES:
                return _T(base.numel, _FLOAT_BYTES[dt], True)
            if dt in _INT_BYTES:
                return _T(base.numel, _INT_BYTES[dt], False)
        return base
    if name in _SAME_SIZE:
        return base
    raise _Unknown(name)


# ------------------------------------------------------------------------------------------- the machine


def read_machine(device: str = "cpu", gpu_free: bool = True) -> Machine:
    """Free host memory (the smaller of /proc/meminfo's MemAvailable and what the cgroup still allows),
    free /dev/shm, and on a GPU the device's total (read once per process) and free memory (nvidia-smi;
    None without it, or when `gpu_free` is off)."""
    info = _meminfo()
    avail = info.get("MemAvailable", info.get("MemFree", 0))
    cg = _cgroup_room()
    if cg is not None:
        avail = min(avail, cg)
    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_bavail * st.f_frsize
    except OSError:
        shm = None
    total = _gpu_total() if device == "cuda" else None
    free = _gpu_query("memory.free") if device == "cuda" and gpu_free else None
    return Machine(host_available=avail, host_total=info.get("MemTotal", avail), shm_available=shm,
                   device_total=total, device_free=free)


def _meminfo(text: str | None = None) -> dict[str, int]:
    if text is None:
        try:
            with open("/proc/meminfo") as f:
                text = f.read()
        except OSError:
            return {}
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[key] = int(fields[0]) * (1024 if len(fields) > 1 and fields[1] == "kB" else 1)
    return out


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> int | None:
    """What this cgroup may still allocate (v2 memory.max - memory.current; v1 limit - usage + inactive
    file cache), or None when unlimited or unreadable."""
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is None:
        limit = _read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        used = _read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes")
        stat = _meminfo_like("/sys/fs/cgroup/memory/memory.stat")
        if used is not None:
            used -= stat.get("total_inactive_file", 0)
    if limit is None or used is None or limit >= 1 << 60:
        return None
    return max(0, limit - used)


def _meminfo_like(path: str) -> dict[str, int]:
    try:
        with open(path) as f:
            return {k: int(v) for k, v in (line.split()[:2] for line in f if len(line.split()) >= 2)
                    if v.isdigit()}
    except OSError:
        return {}


def oom_kill_count() -> int | None:
    """How many processes the kernel's OOM killer has killed in this cgroup (v2 memory.events, v1
    memory.oom_control); None when neither is readable. A rise across a run names the cause of a SIGKILL."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        stats = _meminfo_like(path)
        if "oom_kill" in stats:
            return stats["oom_kill"]
    return None


@functools.lru_cache(maxsize=1)
def _gpu_total() -> int | None:
    return _gpu_query("memory.total")


def _gpu_query(field_name: str) -> int | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, f"--query-gpu={field_name}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.split()[0]) * MB if out and out.split()[0].isdigit() else None
