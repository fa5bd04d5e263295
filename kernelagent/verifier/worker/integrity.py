"""Dynamic integrity probes used inside the workers: ops dispatched, host transfers, poisoned allocations,
kernel launches counted, threads counted. Facts only: the parent judges them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelagent.verifier.oprules import ALLOCATION_OPS, poison_value
from kernelagent.verifier.protocol import Transfers

_TRANSFER_OPS = frozenset({"_to_copy", "copy_", "_copy_from", "to", "_copy_from_and_resize"})
_SCALAR_OPS = frozenset({"_local_scalar_dense", "item"})
# Allowed ops that copy values; (source, destination) positions: "out" is the op's result
_COPY_OPS = {"clone": (0, "out"), "_to_copy": (0, "out"), "to": (0, "out"), "contiguous": (0, "out"),
             "lift_fresh_copy": (0, "out"), "copy_": (1, 0), "_copy_from": (0, 1), "_copy_from_and_resize": (0, 1)}
# ops that can move a tensor onto another storage without a copy op (resize_ grows by reallocating): the copy
# tags follow the tensor (red team, 2026-12-05: x.t().contiguous() grown by resize_ lost its tag and was accepted)
_STORAGE_MOVES = frozenset({"resize_", "resize_as_"})
_active: list[OpRecorder] = []   # the recorders entered, innermost last (custom ops record into them)
_reading: set[int] = set()  # ids of values whose read is being counted (x.__array__ calls x.numpy: one read)
# what hands a tensor's (or storage's) values to Python, NumPy or bytes on the host: (owner, attribute); the
# value read is the first argument (a tensor, a storage, or for torch.save anything holding them)
_HOST_READS = (("torch.Tensor", "numpy"), ("torch.Tensor", "__array__"), ("torch.Tensor", "tolist"),
               ("torch.Tensor", "__dlpack__"), ("torch.UntypedStorage", "tolist"),
               ("torch.TypedStorage", "tolist"), ("torch.UntypedStorage", "__reduce__"),
               ("torch.UntypedStorage", "__reduce_ex__"), ("torch.TypedStorage", "__reduce__"),
               ("torch.TypedStorage", "__reduce_ex__"), ("torch.utils.dlpack", "to_dlpack"),
               ("torch._C", "_to_dlpack"), ("torch._C", "_to_dlpack_versioned"), ("torch", "save"),
               ("torch.serialization", "save"))
_DLPACK = frozenset({"__dlpack__", "to_dlpack", "_to_dlpack", "_to_dlpack_versioned"})  # CPU data only
# reads that hand out the memory itself or write it whole, not copies of the values: what is reachable is
# the tensor's whole storage (np.lib.stride_tricks.as_strided walks past a one-element view, torch.save
# writes the storage; red-team review, 2026-12-03). A GPU tensor's copy to the host is the recorder's.
_WHOLE_STORAGE = _DLPACK | {"numpy", "__array__", "save"}
# where a storage's raw bytes are written out: a file object (legacy torch.save; red team, 2026-12-03, policy
# off: uncounted) or torch.save's zip writer (a __reduce_ex__ returning a tensor hands torch.save storages its
# walk of the object never saw: uncounted until 2026-12-03). (owner, attribute, argument index of the storage,
# self included)
_STORAGE_WRITES = (("torch.UntypedStorage", "_write_file", 0), ("torch._C.PyTorchFileWriter", "write_record", 2))
_budget = [0]  # bytes the reads in progress counted: the storage writes inside them use these up first
# Host memory the candidate can read without a counted call: storages exposed to NumPy or DLPack before forward
# (their addresses), besides memory torch does not own (a NumPy array's, a buffer's: not resizable). A kernel
# or an op writing the inputs' values there hands them to NumPy as surely as `.numpy()` in forward would (red
# team, 2026-12-03: softmax computed in NumPy on a buffer `torch.from_numpy` made in __init__, accepted).
_exposed: dict[int, Any] = {}  # address -> the storage, kept alive so that its address is never reused
_written_args: dict[Any, tuple[tuple[int, str], ...]] = {}  # op -> its mutated arguments (position, name)
_ALIAS_HOMES = ("torch", "torch._C", "torch.utils.dlpack", "torch.serialization")  # other names of the same
# a tensor's values as text (str, repr, format, print, %): torch's printer runs with the dispatch modes off,
# so the recorder sees none of the element reads it makes; the whole tensor's values are counted as read
# (red team, 2026-12-03: str(x[i, j].view(torch.int32)) for every element, softmax in `math`, accepted)
_TEXT_READS = (("torch._tensor_str", "_str"),)
# single values read into Python: counted here whatever the dispatch-mode stack holds (the recorder's count of
# `_local_scalar_dense` misses reads made with the modes off), once per read
_SCALAR_READS = ("item", "__float__", "__int__", "__index__", "__bool__", "__complex__")
_credits = threading.local()  # `.n`: scalar reads counted by a wrapper whose dispatch the recorder has yet to see


def count_host_reads() -> None:
    """Wrap the host reads so that one inside a recorder adds its bytes to that recorder; every other name
    the same function has in torch's namespaces (torch.to_dlpack is torch._C._to_dlpack) is wrapped too.
    Called before the guard's snapshot (torch and torch.Tensor are watched: a candidate putting an original
    back is seen). On the CPU this is how host compute shows at all: NumPy reads a CPU tensor in place, with
    no copy. A DLPack export of a GPU tensor reveals nothing on the host (CuTe DSL launches make one per
    tensor); a copy to the host is counted by the recorder. The Triton interpreter makes none of these reads
    itself (it works on the tensors' memory through their addresses), so none is exempt: a grid function or
    a hook reading values is seen like forward."""
    import torch.serialization  # noqa: F401 - the attributes wrapped below
    import torch.utils.dlpack  # noqa: F401

    wrappers: dict[int, Any] = {}  # id of an original -> its wrapper (the originals stay alive in them)
    for owner_name, name in _HOST_READS:
        owner = _resolve(owner_name)
        original = getattr(owner, name, None)
        if original is not None and not getattr(original, "_ka_counted", False):
            setattr(owner, name, wrappers.setdefault(id(original), _counted(original, name in _DLPACK,
                                                                            name in _WHOLE_STORAGE)))
    for owner_name, name, position in _STORAGE_WRITES:
        owner = _resolve(owner_name)
        original = getattr(owner, name, None)
        if original is not None and not getattr(original, "_ka_counted", False):
            setattr(owner, name, _write_counted(original, position))
    for home in _ALIAS_HOMES:
        space = _resolve(home)
        for attr, value in list(vars(space).items()):
            if id(value) in wrappers and value is not wrappers[id(value)]:
                setattr(space, attr, wrappers[id(value)])
    _count_text_and_scalar_reads()
    _record_redispatches()


def _record_redispatches() -> None:
    """`OpOverload.redispatch(keyset, ...)` runs an op from the keys it is given down: with a key set taken below
    the Python key (one that a torch.library kernel of the candidate's own registered `with_keyset=True` is
    handed), the op skips every dispatch mode, the recorder's included (red team, 2026-12-05: softmax from aten
    ops redispatched with a captured CPU key set, accepted on 11 trials). Inside a recorder such a call is
    recorded as the op itself; one whose key set still holds the Python key reaches the recorder anyway
    (torch.library's own autograd redispatches so), and is left to it."""
    import torch._ops

    original = torch._ops.OpOverload.redispatch
    if getattr(original, "_ka_counted", False):
        return
    python_key, has = torch._C.DispatchKey.Python, torch._C.DispatchKeySet.has  # C's: no subclass overrides it

    def redispatch(self: Any, keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if _active:
            try:
                seen = has(keyset, python_key)
            except TypeError:  # not a key set: recorded, and the original refuses it
                seen = False
            if not seen:
                _active[-1].ops[op_name(self)] += 1
        return original(self, keyset, *args, **kwargs)

    redispatch._ka_counted = True  # type: ignore[attr-defined]
    redispatch.__name__, redispatch.__doc__ = original.__name__, original.__doc__
    torch._ops.OpOverload.redispatch = redispatch


def _count_text_and_scalar_reads() -> None:
    """Wrap torch's printer (each tensor turned into text is a read of its values) and the scalar reads of
    torch.Tensor (each a single-element read, whatever modes are on). The wrappers carry `_ka_counted`: the
    guard watches them like torch's public functions, so one put back or deleted is seen."""
    import torch._tensor_str  # noqa: F401 - the attribute wrapped below

    for owner_name, name in _TEXT_READS:
        owner = _resolve(owner_name)
        original = getattr(owner, name, None)
        if original is not None and not getattr(original, "_ka_counted", False):
            setattr(owner, name, _counted(original, dlpack=False, whole_storage=False))
    for name in _SCALAR_READS:
        original = getattr(torch.Tensor, name, None)
        if original is not None and not getattr(original, "_ka_counted", False):
            setattr(torch.Tensor, name, _scalar_counted(original))


def _scalar_counted(original: Any) -> Any:
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        """Counts one read, and leaves a credit for the one `_local_scalar_dense` it dispatches (when modes are
        on): only further dispatches (code of a tensor subclass's, run inside) are counted again."""
        before = getattr(_credits, "n", 0)
        if _active:
            _active[-1].transfers.scalar_reads += 1
            _credits.n = before + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _credits.n = min(getattr(_credits, "n", 0), before)

    read._ka_counted = True  # type: ignore[attr-defined]
    read.__name__ = getattr(original, "__name__", "read")
    read.__doc__ = getattr(original, "__doc__", None)
    return read


def _resolve(dotted: str) -> Any:
    obj: Any = torch
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _counted(original: Any, dlpack: bool, whole_storage: bool) -> Any:
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = id(self)
        outermost = not _reading
        if outermost:
            _budget[0] = 0
        if _active and key not in _reading and not (dlpack and _on_gpu((self,))):
            n = _nbytes(self, whole_storage=whole_storage and not _on_gpu((self,)))
            _active[-1].transfers.host_read_bytes += n
            _budget[0] += n
        elif not _active and whole_storage:  # outside forward: the memory stays reachable from NumPy after
            _expose(self)
        nested = key in _reading
        _reading.add(key)
        try:
            return original(self, *args, **kwargs)
        finally:
            if not nested:
                _reading.discard(key)
            if outermost:
                _budget[0] = 0

    read._ka_counted = True  # type: ignore[attr-defined]
    read.__name__ = getattr(original, "__name__", "read")
    read.__doc__ = getattr(original, "__doc__", None)
    return read


def _write_counted(original: Any, position: int) -> Any:
    def write(*args: Any, **kwargs: Any) -> Any:
        """A storage written out is a read of it, counted past what the reads in progress counted (torch.save
        counts what it was given, then writes it: once; a storage it writes beyond that is counted)."""
        data = args[position] if len(args) > position else None
        if _active and isinstance(data, (torch.UntypedStorage, torch.TypedStorage)):
            n = int(data.nbytes())
            covered = min(n, _budget[0]) if _reading else 0
            _budget[0] -= covered
            _active[-1].transfers.host_read_bytes += n - covered
        return original(*args, **kwargs)

    write._ka_counted = True  # type: ignore[attr-defined]
    write.__name__ = getattr(original, "__name__", "write")
    write.__doc__ = getattr(original, "__doc__", None)
    return write


def _nbytes(value: Any, limit: int = 100_000, whole_storage: bool = False) -> int:
    """The bytes of the tensors and storages in `value`, looked for through containers and objects'
    attributes (what torch.save would write), up to `limit` objects; with `whole_storage`, of a tensor's
    whole storage (where the read hands out memory, not values)."""
    total, seen, todo = 0, set(), [value]
    while todo and len(seen) < limit:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        try:
            if isinstance(v, torch.Tensor):
                total += max(int(v.numel() * v.element_size()), _storage_bytes(v) if whole_storage else 0)
            elif isinstance(v, (torch.UntypedStorage, torch.TypedStorage)):
                total += int(v.nbytes())
            elif isinstance(v, dict):
                todo.extend(v.values())
            elif isinstance(v, (list, tuple, set, frozenset)) or type(v).__name__ == "deque":
                todo.extend(v)
            elif hasattr(v, "__dict__") and not isinstance(v, type):
                todo.extend(vars(v).values())
        except (RuntimeError, TypeError, AttributeError, ValueError):
            continue
    return total


def _storage_bytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):  # storage-less tensors
        return 0


def _expose(value: Any) -> None:
    try:
        storage = value.untyped_storage() if isinstance(value, torch.Tensor) else value
        if isinstance(storage, (torch.UntypedStorage, torch.TypedStorage)) and not storage.is_cuda:
            _exposed[int(storage.data_ptr())] = storage
    except (RuntimeError, TypeError, AttributeError, NotImplementedError):
        return


def host_shared(value: Any) -> bool:
    """A CPU tensor whose memory host code can read uncounted: torch does not own it (NumPy's, a buffer's)
    or it was exposed to NumPy/DLPack before forward."""
    if not isinstance(value, torch.Tensor) or value.is_cuda or value.is_meta:
        return False
    try:
        storage = value.untyped_storage()
        return not storage.resizable() or int(storage.data_ptr()) in _exposed
    except (RuntimeError, NotImplementedError):
        return False


def count_shared_write(value: Any, copied_from: Any = None) -> None:
    """Values written into host-shared memory inside forward: counted as a host read of those bytes (a copy
    of the memory onto itself, as the interpreter makes of each argument after a launch, writes nothing)."""
    onto_itself = copied_from is not None and storage_of(copied_from) == storage_of(value)
    if _active and host_shared(value) and not onto_itself:
        _active[-1].transfers.host_read_bytes += int(value.numel() * value.element_size())


# in-place ops that change a tensor's metadata, not its values (the interpreter `set_`s each argument)
_METADATA_INPLACE = frozenset({"set_", "resize_", "resize_as_", "as_strided_", "squeeze_", "unsqueeze_",
                               "transpose_", "t_", "swapdims_", "swapaxes_", "detach_", "requires_grad_"})


def _mutated(func: Any, base: str, args: tuple, kwargs: dict) -> list[Any]:
    """The tensors an op (`base`: its name without the namespace) writes values into: its arguments marked
    mutable in its schema (in-place, out=)."""
    if base in _METADATA_INPLACE:
        return []
    spec = _written_args.get(func)
    if spec is None:
        try:
            spec = tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                         if a.alias_info is not None and a.alias_info.is_write)
        except (AttributeError, RuntimeError):
            spec = ()
        _written_args[func] = spec
    return [args[i] if i < len(args) else kwargs.get(name) for i, name in spec]


def storage_of(value: Any) -> int:
    """The address of a tensor's storage (0 for anything else, and for tensors without one)."""
    if not isinstance(value, torch.Tensor):
        return 0
    try:
        return int(value.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # sparse, meta-like or other storage-less tensors
        return 0


def mark_launched(args: Any, kwargs: dict[str, Any]) -> None:
    """A launch's tensor arguments, told to the innermost recorder (the copy rule)."""
    if _active:
        _active[-1].launched([*args, *kwargs.values()])


def note_stream(handle: int) -> None:
    """A launch on the stream `handle` (a CuTe DSL call takes its stream as an argument): the innermost
    recorder counts it as work on a foreign stream when that is not the caller's stream."""
    rec = _active[-1] if _active else None
    if rec is not None and rec.stream is not None and int(handle) != rec.stream:
        rec.transfers.foreign_streams += 1


def op_name(func: Any) -> str:
    packet = getattr(func, "overloadpacket", None)
    ns = getattr(func, "namespace", "aten")
    return f"{ns}.{packet.__name__}" if packet is not None else str(func)


class OpRecorder(TorchDispatchMode):
    """Records every op dispatched and the device-to-host traffic; optionally fills fresh allocations
    with a poison value. Which ops mean "PyTorch computed" is the parent's decision (oprules).

    With poison `"nan"` uninitialised memory reads back as NaN (max int for integers); with
    `"sentinel"` as a distinctive finite value, so unwritten output elements can be located.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # else torch wraps __torch_dispatch__ in dynamo's disable decorator, whose first call imports
        # torch._dynamo (seconds on a cold worker) while the candidate runs
        return False

    def __init__(self, poison: str | None = None):
        super().__init__()
        self.poison = poison
        self.ops: Counter[str] = Counter()
        self.transfers = Transfers()
        self.opened: set[str] = set()  # library ops whose Python bodies ran under this recorder
        self.stream: int | None = None  # the caller's CUDA stream while recording (None on CPU)
        # storages holding the inputs' values or PyTorch's copies of them, and of those the copies: an
        # output that is such a copy, never handed to a kernel, was made by PyTorch (a transpose returned as
        # x.t().contiguous() beside a decoy kernel; red team, 2026-12-01)
        self.inputs: set[int] = set()
        self.sources: set[int] = set()
        self.copies: set[int] = set()

    def __enter__(self) -> OpRecorder:
        self.stream = _current_stream()
        _active.append(self)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if _active and _active[-1] is self:
            _active.pop()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = op_name(func)
        base = name.partition(".")[2]
        self.ops[name] += 1
        if self.stream is not None and _current_stream() != self.stream:
            self.transfers.foreign_streams += 1
        if base in _SCALAR_OPS:  # any device: values read element by element (once: Tensor.item & co. count too)
            if getattr(_credits, "n", 0) > 0:
                _credits.n -= 1
            else:
                self.transfers.scalar_reads += 1
        body = _python_body(func, args)
        if body is not None:  # a torch.library op written in Python: its body is judged like forward
            inner = OpRecorder(poison=self.poison)
            inner.inputs, inner.sources, inner.copies = self.inputs, self.sources, self.copies  # the body is forward's
            with inner:
                out = body(*args, **kwargs)
            self.merge(inner)
            self.opened.add(name)
            return out
        moved = storage_of(args[0]) if base in _STORAGE_MOVES and args else 0
        out = func(*args, **kwargs)
        if moved:
            self._follow(moved, storage_of(args[0]))
        if not _CUDA[0]:  # CPU workers (on a GPU a write from device memory into host memory is a d2h copy)
            source = args[1] if base == "copy_" and len(args) > 1 else None  # only a plain copy can be a no-op
            for written in _mutated(func, base, args, kwargs):
                count_shared_write(written, source)
        if self.sources and base in _COPY_OPS:
            self._track_copy(base, args, out)
        if base in _TRANSFER_OPS:
            self.transfers.d2h_bytes += _d2h_bytes(args, out)
        if self.poison and base in ALLOCATION_OPS and isinstance(out, torch.Tensor) and out.numel():
            out.fill_(poison_value(out.dtype, self.poison == "sentinel"))
        return out

    def watch_inputs(self, values: list[Any]) -> None:
        self.inputs |= {s for s in map(storage_of, values) if s}
        self.sources |= self.inputs

    def launched(self, values: list[Any]) -> None:
        """Tensors handed to a kernel: what a copy holds is the kernel's from now on (the inputs stay inputs:
        a kernel writing into them is an input mutation, judged apart)."""
        for s in map(storage_of, values):
            self.copies.discard(s)
            if s not in self.inputs:
                self.sources.discard(s)

    def copied_outputs(self, leaves: list[Any]) -> list[int]:
        """Indices of the output tensors that are PyTorch's copies of input data, never given to a kernel."""
        return [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor) and storage_of(x) in self.copies]

    def _track_copy(self, base: str, args: tuple, out: Any) -> None:
        src_at, dst_at = _COPY_OPS[base]
        src = args[src_at] if len(args) > src_at else None
        dst = out if dst_at == "out" else (args[dst_at] if len(args) > dst_at else None)
        if storage_of(src) in self.sources and isinstance(dst, torch.Tensor):
            target = storage_of(dst)
            if target:
                self.sources.add(target)
                self.copies.add(target)

    def _follow(self, before: int, after: int) -> None:
        """A tensor's storage moved from `before` to `after`: what was a copy of the inputs there still is."""
        if after and after != before:
            if before in self.copies:
                self.copies.add(after)
            if before in self.sources:
                self.sources.add(after)

    def merge(self, other: OpRecorder) -> None:
        self.ops.update(other.ops)
        self.transfers.add(other.transfers)
        self.opened |= other.opened


def _python_body(func: Any, args: Any) -> Any:
    """The Python implementation a custom op (torch.library.custom_op / triton_op) would run for these
    arguments' device, looked up at dispatch time (so a kernel registered late is seen too); None for
    aten/prim ops and ops without one. Called directly, its inner ops reach the recorder."""
    if getattr(func, "namespace", "aten") in ("aten", "prim"):
        return None
    try:
        from torch._library.custom_ops import _maybe_get_opdef
        opdef = _maybe_get_opdef(func)
    except (ImportError, AssertionError, AttributeError):
        return None
    if opdef is None:
        return None
    device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), None)
    fns = opdef._backend_fns
    return fns.get(device) or fns.get(None) or opdef._init_fn


def _on_gpu(args: Any) -> bool:
    return any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)


def _d2h_bytes(args: Any, out: Any) -> int:
    """Bytes a copy moved from a CUDA tensor into host memory (0 for anything else)."""
    src = next((a for a in args if isinstance(a, torch.Tensor) and a.is_cuda), None)
    dst = out if isinstance(out, torch.Tensor) else None
    if src is None or dst is None or dst.is_cuda:
        return 0
    return dst.numel() * dst.element_size()


_stream_of_caller = torch.cuda.current_stream  # captured before any candidate is imported
_CUDA = [False]  # set when the worker runs on a GPU (worker.candidate), before any candidate code


def use_cuda() -> None:
    _CUDA[0] = True


def _current_stream() -> int | None:
    """The handle of the current CUDA stream (None where CUDA is not in use)."""
    return int(_stream_of_caller().cuda_stream) if _CUDA[0] else None


_MAX_DISTINCT_LAUNCHES = 256  # distinct interpreter launches compiled ahead of time


def _only_launched_grids() -> Any:
    """Refuse an interpreted grid that no recorded launch started: the interpreter's GridExecutor is public, and a
    kernel run through it directly was never recorded, so never compiled ahead of time nor held to the checks on
    what ran (red team, round 12: a dropped branch passed that way, a recorded decoy launch beside it). Returns the
    context manager a recorded launch runs its grid in."""
    from triton.runtime.interpreter import GridExecutor

    from kernelagent.verifier.worker.interp_bounds import InterpreterInternals

    pending = [0]  # grids recorded launches may start: one each, taken before any hook of the candidate's runs
    grid_call = GridExecutor.__call__

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if pending[0] <= 0:
            raise InterpreterInternals("a kernel grid was run without a launch (the interpreter's GridExecutor called "
                                       "directly): launch kernels as kernel[grid](...)")
        pending[0] -= 1
        return grid_call(self, *args, **kwargs)

    @contextlib.contextmanager
    def launching() -> Any:
        before = pending[0]
        pending[0] = before + 1
        try:
            yield
        finally:
            pending[0] = before

    GridExecutor.__call__ = call
    return launching


class LaunchCounter:
    """Counts kernel launches of the candidate's own kernels (Triton on GPU or interpreter, CuTe DSL)."""

    def __init__(self) -> None:
        self.stats: dict[str, Any] = {"triton_launches": 0, "triton_kernels": Counter(), "cute_launches": 0,
                                      "cute_kernels": Counter(), "interpreter_launches": []}

    def note_launch(self, launch: dict[str, Any]) -> dict[str, Any]:
        """Keep each distinct interpreter launch (kernel, where it is defined, argument kinds) for the ahead-of-
        time compile; past the cap a new one is kept as a marker that no compile can satisfy, so launching a
        harmless kernel many times first cannot hide a later one from the check. Returns the record kept for
        this launch's compile (the lines its grid runs are added to it)."""
        from kernelagent.verifier.worker.compile_facts import launch_key

        seen = self.stats["interpreter_launches"]
        key = launch_key(launch)
        for old in seen:
            if launch_key(old) == key:
                return old
        seen.append(launch if len(seen) < _MAX_DISTINCT_LAUNCHES else {**launch, "over_cap": True})
        return seen[-1]

    @property
    def total(self) -> int:
        return int(self.stats["triton_launches"]) + int(self.stats["cute_launches"])

    def snapshot(self) -> int:
        return self.total

    def kernels(self) -> dict[str, int]:
        return dict(self.stats["triton_kernels"]) | dict(self.stats["cute_kernels"])

    def install_triton(self, interpreter: bool) -> None:
        import triton

        if interpreter:
            from triton.runtime.interpreter import InterpretedFunction

            from kernelagent.verifier.worker import interp_lines
            from kernelagent.verifier.worker.compile_facts import describe_launch

            original = InterpretedFunction.run
            counter = self
            launching = _only_launched_grids()

            def run(fn_self, *args, grid, warmup, **kwargs):  # noqa: ANN001
                if warmup:
                    with launching():
                        return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
                mark_launched(args, kwargs)
                counter.stats["triton_launches"] += 1
                counter.stats["triton_kernels"][fn_self.fn.__name__] += 1
                record = counter.note_launch(describe_launch(fn_self, args, kwargs))
                with launching():
                    result = original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
                interp_lines.merge_into(record, interp_lines.ran())  # the kernel code this compile must hold
                return result

            InterpretedFunction.run = run
            return

        def enter(metadata: Any) -> None:
            self.stats["triton_launches"] += 1
            data = getattr(metadata, "data", None)  # triton's LazyDict keeps the launch name in .data
            name = data.get("name", "?") if isinstance(data, dict) else "?"
            self.stats["triton_kernels"][str(name)] += 1
            stream = data.get("stream") if isinstance(data, dict) else None
            rec = _active[-1] if _active else None
            if rec is not None and rec.stream is not None and stream is not None and int(stream) != rec.stream:
                rec.transfers.foreign_streams += 1

        triton.knobs.runtime.launch_enter_hook.add(enter)
        self._triton_hook = enter
        from triton.runtime.jit import JITFunction

        jit_run = JITFunction.run

        def run(fn_self, *args, grid, warmup, **kwargs):  # noqa: ANN001 - JITFunction.run's own signature
            if not warmup:
                mark_launched(args, kwargs)
            return jit_run(fn_self, *args, grid=grid, warmup=warmup, **kwargs)

        JITFunction.run = run

    def remove_triton_hook(self) -> None:
        """Timing must not pay for a Python callback per launch."""
        hook = getattr(self, "_triton_hook", None)
        if hook is not None:
            import triton
            triton.knobs.runtime.launch_enter_hook.remove(hook)

    def install_cute(self) -> bool:
        try:
            from kernelagent.verifier.cute import support as cute_support
        except ImportError:
            return False
        try:
            cute_support.install_hooks(self.stats, on_stream=note_stream)
        except Exception as e:  # noqa: BLE001 - launches then go uncounted; the report says so
            self.stats["cute_hook_error"] = f"{type(e).__name__}: {e}"[:200]
            return False
        return True


def os_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def python_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate())
