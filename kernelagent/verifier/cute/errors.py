"""CuTe DSL errors for the LLM: which phase failed (compile or run, or no GPU to run on) and the
DSL's rustc-style report trimmed to the candidate's own lines. Standard library only.

The DSL's reports carry ANSI colours, a `-->` location with a source excerpt and caret, `note:`
and `suggestion:` lines, and sometimes framework locations, GPU-info blocks and advice meant for
people filing DSL bugs; `clean_error` keeps the first kinds and drops the rest.
"""

from __future__ import annotations

import contextlib
import os
import re
import traceback

DEFAULT_ARCH = "sm_90a"
NO_GPU = "no_gpu"  # not a report category: compile passed, correctness skipped
NO_GPU_NOTE = "correctness not run: no GPU on this machine (the kernel was compiled for {arch} only)"
MAX_CHARS = 2000
PHASE_ATTR = "_kernelagent_cute_phase"  # set on exceptions by the hooks: "compile" | "run"

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NO_GPU_MARKERS = (
    "cudaErrorInsufficientDriver", "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "0 active drivers",
    "Found no NVIDIA driver", "No CUDA GPUs are available", "Torch not compiled with CUDA enabled",
    "can only be found via system search",
)
_EXCERPT = re.compile(r"^(>?\s*\d+\s*\||\|(\s.*)?$|in function `)")
_LABEL = re.compile(r"^(=\s*)?(error|warning|note|suggestion|help|remark|hint)\b")
_DROP = ("CUTE_DSL_SHOW_STACKTRACE", "GPU Information", "Failed to get GPU info", "CUDA_TOOLKIT_PATH:",
         "Target SM ARCH:", "Traceback (most recent call last)", "This is a bug in the DSL",
         "Please report this", "Error name:", "Error code:")

# Known messages and what to do about them (each measured with nvidia-cutlass-dsl 4.8.1).
_HINTS = (
    ("range_constexpr should be preprocessed",
     "cutlass.range_constexpr and const_expr work only inside @cute.jit/@cute.kernel functions; in an "
     "undecorated helper use a plain Python `range`/`if` (they run at trace time) or decorate it with @cute.jit"),
    ("does not meet requirement",
     "the tensor's layout does not prove the copy's alignment: pass from_dlpack(t, assumed_align=16), keep "
     "divisibility with mark_compact_shape_dynamic (not mark_layout_dynamic), or copy fewer bits per atom"),
    ("to have static shape",
     "copies need static per-thread shapes: keep the partitioned (row) extent a compile-time constant "
     "(cutlass.Constexpr, or mark only the row count dynamic with mark_compact_shape_dynamic(mode=0, ...))"),
    ("expects pred to have compatible",
     "the predicate must have the partition's shape without its value mode: "
     "(cute.size(t, mode=[0, 1]), cute.size(t, mode=[1])) for a thread partition t"),
    ("Type mismatch, store",
     "convert before storing: `frag.store(values.to(frag.element_type))` or `t[i] = v.to(t.element_type)`"),
    ("has no attribute 'make_fragment'",
     "removed in 4.6: use cute.make_rmem_tensor(shape, dtype) or cute.make_fragment_like(t)"),
    ("Can't export tensors that require gradient",
     "from_dlpack of an nn.Parameter: pass `param.detach()` (a view, no copy)"),
    ("TVM FFI",
     "apache-tvm-ffi is not installed: compile without --enable-tvm-ffi and pass from_dlpack tensors and a "
     "cuda.CUstream"),
)


def classify_exception(exc: BaseException, candidate_path: str = "") -> tuple[str, str]:
    """(category, message) for an exception out of a CuTe DSL candidate.

    NO_GPU: compiled, but nothing could run (no driver or device); the worker records the compile
    as passed and correctness as skipped. "compile_error": raised while tracing or compiling (DSL
    errors and plain Python errors in the kernel alike). "runtime_error": raised running compiled
    code, or by the candidate's own Python. The phase comes from the hooks' tag when present.
    """
    if is_no_gpu(exc):
        return NO_GPU, NO_GPU_NOTE.format(arch=os.environ.get("CUTE_DSL_ARCH") or DEFAULT_ARCH)
    phase = getattr(exc, PHASE_ATTR, None) or ("compile" if _is_dsl_compile_error(exc) else "run")
    category = "compile_error" if phase == "compile" else "runtime_error"
    return category, clean_error(exception_text(exc, candidate_path), candidate_path)


def clean_error(text: str, candidate_path: str) -> str:
    """The DSL's error text for the LLM: no ANSI codes; error, note and suggestion lines kept;
    `-->` locations and their source excerpts kept only where they point into the candidate
    (shown by file name); framework frames, GPU-info blocks and bug-report advice dropped; a
    `hint:` added for known messages; at most MAX_CHARS."""
    plain = ANSI.sub("", text)
    out: list[str] = []
    keep_excerpt, skip_continuation, skip_frame = True, False, False
    for line in plain.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("-->"):
            keep_excerpt = in_candidate(s, candidate_path)
            if keep_excerpt:
                out.append(_shorten(line, candidate_path))
            continue
        if _EXCERPT.match(s):
            if keep_excerpt:
                out.append(line)
            continue
        if s.startswith('File "'):
            skip_frame = not in_candidate(s, candidate_path)
            if not skip_frame:
                out.append(_shorten(line, candidate_path))
            continue
        if skip_frame and line.startswith("    ") and not _LABEL.match(s):
            continue  # the source line under a framework frame
        skip_frame = False
        if skip_continuation and line.startswith(" " * 8) and not _LABEL.match(s):
            continue  # the wrapped tail of a dropped line
        skip_continuation = any(marker in s for marker in _DROP)
        if not skip_continuation:
            out.append(_shorten(line, candidate_path))
    body = _cap("\n".join(out).strip())
    hints = [f"hint: {hint}" for marker, hint in _HINTS if marker in plain]
    return "\n".join([body, *hints]) if hints else body


def exception_text(exc: BaseException, candidate_path: str) -> str:
    """The DSL's own report for its errors, else `Type: message`; then the candidate's frames
    (file, line, code; innermost last) when the text does not already point into the candidate."""
    body = once(ANSI.sub("", str(exc)).strip())  # the DSL colours its report and prints it twice
    is_dsl = "DSLBaseError" in [c.__name__ for c in type(exc).__mro__]
    text = body if is_dsl and body else (f"{type(exc).__name__}: {body}" if body else type(exc).__name__)
    cause = exc.__cause__
    if is_dsl and cause is not None and str(cause) and str(cause) not in text:
        text += f"\ncaused by {type(cause).__name__}: {cause}"
    if candidate_path and not any(in_candidate(ln, candidate_path) for ln in ANSI.sub("", text).splitlines()
                                  if ln.strip().startswith("-->")):
        text += "".join(f'\n  File "{f.filename}", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}'
                        for f in candidate_frames(exc, candidate_path)[-3:])
    return text


def once(text: str) -> str:
    """The text without a repeat of itself: a report followed by a copy (blank lines ignored) is kept once."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    solid = [ln for ln in lines if ln.strip()]
    for size in range(len(solid) // 2, 0, -1):
        if solid[-size:] == solid[-2 * size:-size] and size * 2 == len(solid):
            return "\n".join(_first_lines(lines, size))
    return text


def _first_lines(lines: list[str], solid_count: int) -> list[str]:
    out, seen = [], 0
    for ln in lines:
        if seen == solid_count:
            break
        out.append(ln)
        seen += bool(ln.strip())
    return out


def candidate_frames(exc: BaseException, candidate_path: str) -> list[traceback.FrameSummary]:
    """Traceback frames in the candidate file over the exception's cause/context chain."""
    return [f for e in _chain(exc) for f in traceback.extract_tb(e.__traceback__)
            if in_candidate(f.filename, candidate_path)]


def tag_phase(exc: BaseException, phase: str) -> None:
    """Mark where an exception came from; the innermost hook wins."""
    if getattr(exc, PHASE_ATTR, None) is None:
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, PHASE_ATTR, phase)


def is_no_gpu(exc: BaseException) -> bool:
    """True when the exception (or its cause) says there is no CUDA driver or device."""
    return any(marker in str(e) for e in _chain(exc) for marker in _NO_GPU_MARKERS)


def in_candidate(text: str, candidate_path: str) -> bool:
    if not candidate_path:
        return False
    return candidate_path in text or os.path.realpath(candidate_path) in text


def _shorten(line: str, candidate_path: str) -> str:
    if not candidate_path:
        return line
    name = os.path.basename(candidate_path)
    return line.replace(os.path.realpath(candidate_path), name).replace(candidate_path, name)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 4].rstrip() + "\n..."


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and not any(cur is e for e in out):
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _is_dsl_compile_error(exc: BaseException) -> bool:
    names = [c.__name__ for c in type(exc).__mro__]
    return "DSLBaseError" in names and "DSLCudaRuntimeError" not in names
