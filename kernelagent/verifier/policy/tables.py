"""Name tables of the static policy: which names each rule covers and what the author is told to do.

Kept apart from the checking code so the lists can be read (and reviewed) on their own.
"""

from __future__ import annotations

import re
import types

# What the candidate is told to do instead, per rule. Written for the LLM that must fix its kernel.
HINTS: dict[str, str] = {
    "syntax": "fix the syntax error so the file parses; a file nested too deeply, or too large or indirect to "
              "check in time, must be simplified",
    "torch_compute": (
        "compute it in your own Triton/CuTe kernel; in forward only allocation (torch.empty*, zeros*), "
        "views and reshapes, .contiguous(), dtype/device moves and kernel launches are allowed"
    ),
    "reference_access": (
        "write ModelNew as a standalone nn.Module; do not import, subclass or call the reference "
        "(Model, get_inputs, get_init_inputs) or the problem file"
    ),
    "introspection": (
        "remove it; a kernel must not inspect frames, the garbage collector, loaded modules or "
        "interpreter state"
    ),
    "threads": "do all work synchronously inside forward; threads, processes and async tasks are not allowed",
    "subprocess": "remove it; starting processes or shell commands is not allowed",
    "network": "remove it; network access is not allowed",
    "ctypes": "write the kernel in Triton or CuTe DSL; native code through ctypes/cffi/C++ extensions is not allowed",
    "file_io": "remove it; reading or writing files is not allowed, keep all state in memory",
    "env_access": "use constants or constructor arguments; reading or changing environment variables is not allowed",
    "eval_exec": "write the code directly in the file; eval/exec/compile of strings is not allowed",
    "monkey_patch": (
        "do not modify torch, triton or other libraries, global PyTorch settings or hooks; set "
        "attributes only on self, ctx or your own classes"
    ),
    "try_around_kernel": (
        "remove the try/except around the kernel path: let errors propagate and choose launch "
        "settings that always work"
    ),
    "stream_creation": (
        "launch on the current stream (torch.cuda.current_stream()); do not create, switch or "
        "capture CUDA streams or graphs"
    ),
    "forbidden_import": (
        "import only torch, triton, cutlass, cuda (cuda-bindings), numpy, einops and the standard "
        "modules math, functools, typing, dataclasses, enum, operator, itertools, collections, "
        "numbers, abc, warnings, contextlib"
    ),
    "dynamic_import": "use plain import statements for the allowed modules",
    "dynamic_attr": "write attribute names out in the source (e.g. torch.float16), not names computed at run time",
    "tensor_subclass": (
        "return plain torch.Tensor outputs written by your kernel; tensor subclasses and "
        "__torch_function__/__torch_dispatch__ are not allowed"
    ),
    "process_exit": (
        "report a problem by raising an ordinary exception (ValueError, RuntimeError, ...); ending the "
        "process or the call any other way is not allowed"
    ),
    "undefined_name": "import or define every name the file uses; names a library puts into the module at run "
                      "time are not allowed",
}

# One line per rule, for documentation.
DESCRIPTIONS: dict[str, str] = {
    "syntax": "the file does not parse (or is nested too deeply, or too large or indirect, to check in time)",
    "torch_compute": "PyTorch (or NumPy) computes inside the forward path: torch/F/torch.ops calls, tensor "
                     "methods, tensor arithmetic, nn layers, torch functions passed around, torch in kernel code; "
                     "host compute (NumPy or math on tensors, .item()/.tolist() in loops); PyTorch in special "
                     "methods of the candidate's classes (__iter__, __getitem__, ...)",
    "reference_access": "the reference is reached: importing op/reference/problem/kernelagent/__main__, "
                        "relative imports, subclassing Model or any class from outside, the names Model/get_inputs",
    "introspection": "gc, inspect, frames, sys._getframe/sys.modules, builtins, globals()/locals()/vars(), "
                     "code objects, closures, class internals, bound-method internals, __reduce__, namespaces "
                     "of outside objects, __loader__/__spec__, atexit/signal/weakref, metaclasses, __del__, "
                     "private library internals",
    "threads": "threading, _thread, concurrent, multiprocessing, asyncio, queue, torch.jit.fork",
    "subprocess": "subprocess, pty, os.system/popen/exec*/spawn*/fork/kill, triton.testing, tools that run "
                  "programs",
    "network": "socket, http, urllib, requests, httpx, ssl and other network modules",
    "ctypes": "ctypes, cffi, mmap, C++ extensions (torch.utils.cpp_extension), torch.ops.load_library",
    "file_io": "open, io, pathlib, shutil, tempfile, pickle/marshal/shelve, os file functions, torch.save/load, "
               "storage from_file, tofile, native writers and readers of the allowed libraries (profilers and "
               "their trace exports, TorchScript/torch.export/ONNX/FX archives, torch.compile, NumPy's file "
               "functions, .save/.dump of library objects, shared memory), __file__/__path__",
    "env_access": "os.environ, os.getenv, os.putenv, triton.knobs",
    "eval_exec": "eval, exec, compile, code, typing.get_type_hints, singledispatch, string annotations that "
                 "are code",
    "monkey_patch": "assigning/setattr/delattr on outside modules and objects, hooks, torch.library code for "
                    "PyTorch's own operators, global PyTorch settings (seeds, default dtype, TF32, allocator)",
    "try_around_kernel": "try/except (not re-raising) or contextlib.suppress around the kernel path in forward",
    "stream_creation": "creating, switching or capturing CUDA streams or graphs, or asking whether a capture is under "
                       "way (torch.cuda.Stream/stream/graph/is_current_stream_capturing, "
                       "cuStreamCreate, raw CUstream handles); anything of the CUDA driver or runtime bindings "
                       "(cuda-python, cutlass.cuda) but the CUstream type and the result codes",
    "forbidden_import": "an import outside the allowed list (named in the message); unlisted os functions; "
                        "torch.utils modules other than dlpack",
    "dynamic_import": "__import__, importlib, runpy, pkgutil, torch.ops.import_module, torch.package",
    "dynamic_attr": "getattr/setattr with a name computed at run time, getattr/attrgetter handed to other "
                    "code, star imports, names passed through too many assignments or calls to follow",
    "tensor_subclass": "torch.Tensor subclasses, __torch_function__, __torch_dispatch__",
    "process_exit": "raising SystemExit/KeyboardInterrupt/GeneratorExit/BaseException (or a class built on them, "
                    "or a value whose class cannot be told), sys.exit, exit()/quit(), os._exit, os.abort, signal",
    "undefined_name": "a global name read but bound nowhere in the file (the Triton interpreter copies its own "
                      "globals, `inspect` and `np` among them, into the module of every kernel it runs)",
}

# Top-level modules a candidate may import. os and sys are judged per attribute used.
ALLOWED_IMPORT_ROOTS = frozenset({
    "torch", "triton", "cutlass", "cuda", "math", "functools", "typing", "typing_extensions",
    "dataclasses", "enum", "operator", "itertools", "collections", "numbers", "abc", "numpy",
    "einops", "__future__", "warnings", "contextlib", "os", "sys",
})

# C modules and implementation modules, named by the public module they stand behind; a name that
# reaches them is judged as that module (`posix.kill` is `os.kill`).
MODULE_ALIASES: dict[str, str] = {
    "posix": "os", "nt": "os", "posixpath": "os.path", "ntpath": "os.path", "genericpath": "os.path",
    "_io": "io", "_pyio": "io", "_pickle": "pickle", "_compat_pickle": "pickle", "_socket": "socket",
    "_signal": "signal", "_ctypes": "ctypes", "_posixsubprocess": "subprocess", "_multiprocessing": "multiprocessing",
    "_posixshmem": "multiprocessing", "_frozen_importlib": "importlib", "_frozen_importlib_external": "importlib",
    "_imp": "importlib", "_weakref": "weakref", "_weakrefset": "weakref", "_tracemalloc": "tracemalloc",
    "_functools": "functools", "_operator": "operator", "_collections": "collections",
    "_collections_abc": "collections.abc", "_warnings": "warnings", "_abc": "abc", "_py_abc": "abc",
    "_asyncio": "asyncio", "_queue": "queue", "_ssl": "ssl", "_sqlite3": "sqlite3", "_bz2": "bz2", "_lzma": "lzma",
    "_gdbm": "dbm", "_dbm": "dbm", "_sitebuiltins": "builtins", "_contextvars": "contextvars",
}

# Private names a kernel may use: Triton's aggregate decorator, and CuTe DSL's MLIR op builders (for
# inline PTX); both only build device code when the kernel is traced.
PRIVATE_OK = ("triton.language.core._aggregate", "cutlass._mlir.dialects", "cutlass._mlir.ir")
# Private homes that intercept, trace or record PyTorch's work (or set up processes): a public name
# that leads here is treated like the private name. Other private homes back documented API
# (`torch._C._nn` behind `F.avg_pool2d`, `torch.jit._script` behind `torch.jit.script`) and pass,
# unless the object's own name is private.
PRIVATE_MACHINERY = (
    "torch.utils._python_dispatch", "torch._subclasses", "torch._dynamo", "torch._inductor", "torch._functorch",
    "torch._export", "torch._guards", "torch._utils_internal", "torch._prims", "torch._refs", "torch._decomp",
    "torch._logging", "torch._library.fake_impl", "torch._library.fake_class_registry", "torch._C._dynamo",
    "torch._C._functorch", "torch._C._profiler", "torch._C._autograd", "torch.overrides",
)

# Module names that mean "the reference or the verifier".
REFERENCE_MODULES = frozenset({
    "op", "reference", "problem", "kernelagent", "__main__", "__mp_main__", "ref", "model",
})
REFERENCE_NAMES = frozenset({"Model", "get_inputs", "get_init_inputs", "get_test_inputs"})

_OS_SUBPROCESS = (
    "system popen execv execve execl execle execlp execlpe execvp execvpe spawnl spawnle spawnlp "
    "spawnlpe spawnv spawnve spawnvp spawnvpe fork forkpty posix_spawn posix_spawnp kill killpg"
).split()
_OS_FILES = (
    "remove unlink rename renames replace makedirs mkdir rmdir removedirs open fdopen read write "
    "listdir scandir walk chdir chmod chown link symlink truncate path stat lstat mkfifo mknod "
    "sendfile pipe dup dup2 close utime access getcwd fspath"
).split()
_OS_ENV = "environ environb getenv getenvb putenv unsetenv".split()
# os/sys attributes that are harmless to read.
OS_OK = frozenset({"sep", "linesep", "name", "cpu_count", "getpid", "pathsep", "curdir"})
SYS_OK = frozenset({
    "version", "version_info", "hexversion", "maxsize", "platform", "byteorder", "float_info",
    "int_info", "implementation", "stdout", "stderr", "getsizeof", "float_repr_style",
})

# Qualified-name prefix -> rule, for names that are not allowed anywhere in the file.
BANNED: dict[str, str] = {
    **{m: "threads" for m in (
        "threading", "_thread", "concurrent", "multiprocessing", "asyncio", "sched", "queue",
        "_asyncio", "torch.multiprocessing", "torch.utils.data", "torch.jit.fork", "torch.jit.wait",
        "torch.futures", "torch.prepare_multiprocessing_environment",
    )},
    **{m: "subprocess" for m in (
        "subprocess", "pty", "pexpect", "_posixsubprocess", "torch.utils.collect_env", "triton.runtime.build",
        "triton.tools", "numpy.f2py", "numpy.distutils", "triton.testing", "triton.knobs.NvidiaTool",
        "triton.knobs.env_nvidia_tool", "torch.utils.bottleneck", "torch.utils.hipify",
    )},
    **{f"os.{n}": "subprocess" for n in _OS_SUBPROCESS},
    **{m: "network" for m in (
        "socket", "http", "urllib", "urllib3", "requests", "httpx", "ssl", "ftplib", "smtplib",
        "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver", "aiohttp", "websocket",
        "websockets", "grpc", "paramiko", "select", "selectors", "torch.hub", "torch.distributed",
    )},
    **{m: "ctypes" for m in (
        "ctypes", "_ctypes", "cffi", "mmap", "torch.utils.cpp_extension", "torch.ops.load_library",
        "torch.classes.load_library", "numpy.ctypeslib", "torch.cuda.jiterator", "numpy.testing.extbuild",
        "numpy.testing._private.extbuild",
        # NumPy views at any address: as_strided over an array of its own with strides reaching a tensor's
        # data_ptr() read and wrote the tensors with no tensor handed to NumPy (red team, 2026-12-03)
        "numpy.lib.stride_tricks", "numpy.lib._stride_tricks_impl", "numpy.lib.array_utils",
        "numpy.lib._array_utils_impl", "numpy.byte_bounds", "numpy.lib.utils",
    )},
    # code given as strings (Python or C++), compiled and run by the library
    **{m: "eval_exec" for m in ("torch.utils.benchmark", "numpy.testing.rundocs")},
    **{m: "file_io" for m in (
        "io", "_io", "pathlib", "shutil", "tempfile", "pickle", "_pickle", "cPickle", "marshal",
        "shelve", "dbm", "sqlite3", "glob", "fileinput", "zipfile", "tarfile", "gzip", "bz2", "lzma",
        "builtins.open", "torch.save", "torch.load", "torch.from_file", "numpy.save", "numpy.savez",
        "numpy.savez_compressed", "numpy.load", "numpy.loadtxt", "numpy.savetxt", "numpy.genfromtxt",
        "numpy.fromfile", "numpy.memmap", "numpy.fromregex", "numpy.DataSource", "numpy.lib.npyio",
        "numpy.lib.format", "numpy.lib.DataSource", "torch.serialization", "torch.jit.load", "torch.jit.save",
        "torch.utils.file_baton", "torch.cuda.tunable", "triton.runtime.cache",
        # native writers and readers: profilers and their trace exports, archives, GPUDirect Storage
        "torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_legacy", "torch.autograd.profiler_util",
        "torch.cuda.profiler", "torch.cuda.gds", "torch.onnx", "torch.export", "torch.fx", "torch.nativert",
        "torch.compile", "torch.compiler.compile", "torch.compiler.load_compiled_function",
        "torch.nn.Module.compile",  # the same compiler through a module's method (red team, 2026-12-03)
        "torch.compiler.save_cache_artifacts", "torch.compiler.load_cache_artifacts", "torch.utils.tensorboard",
        "torch.utils.show_pickle", "torch.utils.model_dump", "torch.utils.mobile_optimizer",
        "torch.utils.bundled_inputs", "torch.utils.viz", "torch.utils.serialization",
        *(f"torch.jit.{n}" for n in (
            "script trace trace_module freeze optimize_for_inference run_frozen_optimizations ScriptModule "
            "ScriptFunction RecursiveScriptModule RecursiveScriptClass TopLevelTracedModule TracedModule "
            "ONNXTracedModule CompilationUnit jit_module_from_flatbuffer save_jit_module_to_flatbuffer "
            "export_opnames script_if_tracing script_method last_executed_optimized_graph frontend mobile"
        ).split()),
        "numpy.rec.fromfile", "numpy.ma.fromfile", "numpy.ma.core.fromfile", "numpy.ma.mrecords", "numpy.testing",
        "triton.profiler", "triton.compile", "triton.compiler.compile", "triton.compiler.compiler",
        # readers of any file's lines through linecache (red team, 2026-12-05: formatwarning('m', UserWarning,
        # PATH, 1) returned a line of /etc/hostname, a Landlock grant)
        "warnings.formatwarning", "warnings.showwarning", "warnings.warn_explicit", "warnings._formatwarnmsg",
        "warnings._formatwarnmsg_impl", "warnings._showwarnmsg", "warnings._showwarnmsg_impl",
    )},
    **{f"os.{n}": "file_io" for n in _OS_FILES},
    **{f"os.{n}": "env_access" for n in _OS_ENV},
    # Triton's settings, read from and written to the environment (setenv, env_str, ...; red team, 2026-12-05:
    # a round trip through knobs.setenv and env_str was accepted)
    "triton.knobs": "env_access",
    **{m: "introspection" for m in (
        "gc", "inspect", "builtins", "__builtin__", "traceback", "types", "dis", "atexit",
        "weakref", "faulthandler", "tracemalloc", "linecache", "pdb", "bdb", "trace", "cProfile",
        "profile", "copyreg", "sys._getframe", "sys._current_frames", "sys.modules", "sys.settrace",
        "sys.setprofile", "sys.gettrace", "sys.getprofile", "sys.meta_path", "sys.path_hooks",
        "sys.path_importer_cache", "sys.path", "sys.addaudithook", "sys.excepthook",
        "sys.displayhook", "sys.breakpointhook", "sys.getrefcount", "sys.setrecursionlimit",
        "sys.exc_info", "sys.exception", "sys.last_traceback", "builtins.globals", "builtins.locals",
        "builtins.vars", "builtins.breakpoint", "builtins.__build_class__", "builtins.__loader__",
        "builtins.__spec__", "builtins.help", "numpy.core",
        # an object's address: with raw pointers (the interpreter's are host addresses) it reaches any object
        "builtins.id",
    )},
    # typing.get_type_hints and singledispatch's register evaluate string annotations with eval
    **{m: "eval_exec" for m in (
        "builtins.eval", "builtins.exec", "builtins.compile", "code", "codeop", "typing.get_type_hints",
        "typing.ForwardRef", "typing_extensions.get_type_hints", "typing_extensions.ForwardRef",
        "typing_extensions.evaluate_forward_ref", "typing.evaluate_forward_ref", "functools.singledispatch",
        "functools.singledispatchmethod", "annotationlib",
    )},
    **{m: "dynamic_import" for m in (
        "importlib", "imp", "runpy", "pkgutil", "zipimport", "builtins.__import__", "torch.ops.import_module",
        "torch.package",
    )},
    **{m: "monkey_patch" for m in (
        "unittest.mock", "torch.manual_seed", "torch.seed", "torch.set_rng_state", "torch.random",
        "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.set_rng_state",
        "torch.cuda.set_rng_state_all", "torch.cuda.seed", "torch.cuda.seed_all",
        "torch.set_default_dtype", "torch.set_default_device", "torch.set_default_tensor_type",
        "torch.set_float32_matmul_precision", "torch.use_deterministic_algorithms",
        "torch.set_deterministic_debug_mode", "torch.set_flush_denormal", "torch.set_num_threads",
        "torch.set_num_interop_threads", "torch.cuda.set_per_process_memory_fraction",
        "torch.cuda.memory.set_per_process_memory_fraction", "torch.cuda.memory.change_current_allocator",
        "torch.cuda.memory.CUDAPluggableAllocator", "torch.cuda.change_current_allocator",
        "torch.cuda.CUDAPluggableAllocator", "torch.overrides", "torch.autograd.graph",
        "torch.nn.modules.module.register_module_forward_hook",
        "torch.nn.modules.module.register_module_forward_pre_hook",
        "torch.nn.modules.module.register_module_full_backward_hook",
        "torch.nn.modules.module.register_module_full_backward_pre_hook",
        "torch.nn.modules.module.register_module_backward_hook",
        "torch.nn.modules.module.register_module_buffer_registration_hook",
        "torch.nn.modules.module.register_module_parameter_registration_hook",
        "torch.nn.modules.module.register_module_module_registration_hook",
        "torch.jit.enable_onednn_fusion", "torch.jit.set_fusion_strategy", "torch.jit.fuser",
        "torch.jit.optimized_execution", "torch.utils.deterministic", "torch.utils.flop_counter",
        "torch.utils.module_tracker", "torch.utils.backend_registration", "torch.utils.hooks",
        # sys.stdout / sys.stderr swapped by the standard library on the candidate's behalf (red team,
        # 2026-12-03: the Triton interpreter's device_print output captured and parsed back into the inputs)
        "contextlib.redirect_stdout", "contextlib.redirect_stderr",
    )},
    # ending the interpreter or the call outside the ordinary error path (exception classes that are
    # not Exceptions are found by what they are, wherever they are reached from)
    **{m: "process_exit" for m in (
        "builtins.exit", "builtins.quit", "sys.exit", "os._exit", "os.abort", "signal",
    )},
}

# torch.utils is a toolbox of its own; a kernel may use these modules of it (others are forbidden_import).
TORCH_UTILS_OK = frozenset({"dlpack"})

# Called, these create, switch or capture streams (the stream_creation rule).
STREAM_CALLS = frozenset({
    "torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
    "torch.cuda.ExternalStream", "torch.cuda.streams.ExternalStream", "torch.cuda.StreamContext",
    "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
    "torch.cuda.default_stream", "torch.Stream", "torch.StreamContext", "torch.accelerator.set_stream",
    "torch.cuda.use_mem_pool", "triton.runtime.driver.active.set_current_stream", "torch.accelerator.Graph",
    "torch.accelerator.graphs",
    "cuda.bindings.driver.cuStreamCreate", "cuda.bindings.driver.cuStreamCreateWithPriority",
    "cuda.bindings.driver.cuStreamBeginCapture", "cuda.bindings.driver.cuGraphCreate",
    "cuda.bindings.runtime.cudaStreamCreate", "cuda.bindings.runtime.cudaStreamCreateWithFlags",
    "cuda.bindings.runtime.cudaStreamCreateWithPriority", "cuda.bindings.runtime.cudaStreamBeginCapture",
    "cuda.cuda.cuStreamCreate", "cuda.cudart.cudaStreamCreate", "cutlass.torch.default_stream",
    "torch.mtia.Stream", "torch.cuda.streams.Event.__new__", "torch.cuda.Stream.__new__",
    # asking whether a graph is being captured: the verifier captures small kernels for timing, and a kernel
    # that answers differently then has replays that launch nothing (tests/corpus/wrong/timing/capture_skip.py)
    "torch.cuda.is_current_stream_capturing", "torch.cuda.graphs.is_current_stream_capturing",
    "torch.accelerator.is_current_stream_capturing",
})
CUSTREAM_TYPES = frozenset({"cuda.bindings.driver.CUstream", "cuda.cuda.CUstream", "cuda.CUstream"})

# The CUDA driver and runtime bindings (cuda-python, and CuTe DSL's own wrappers of them). Streams, events,
# copies and launches made through them are invisible to the verifier's op recorder and launch hooks (a
# non-blocking stream of the candidate's own ran work beside the timing spin unseen: red-team review,
# 2026-12-02), so a kernel may name only these modules themselves, the stream type (to wrap torch's current
# stream: `cuda.CUstream(torch.cuda.current_stream().cuda_stream)`) and the result codes.
RAW_CUDA_ROOTS = ("cuda.", "cutlass.cuda.", "cutlass.base_dsl.runtime.cuda.")
RAW_CUDA_MODULES = frozenset({
    "cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.bindings.runtime", "cuda.cuda", "cuda.cudart",
    "cutlass.cuda", "cutlass.base_dsl.runtime.cuda",
})
RAW_CUDA_OK = CUSTREAM_TYPES | {"cuda.bindings.driver.CUresult", "cuda.cuda.CUresult", "cuda.CUresult"}


# CuTe DSL's modules that hold the driver under another name (cutlass.torch.cuda, cutlass.utils.hardware_info
# .driver, cutlass.base_dsl.jit_executor.cuda_helpers, ...): a cutlass path through one of these segments
# reaches the bindings too (red-team review, 2026-12-02)
CUTLASS_DRIVER_SEGMENTS = frozenset({"cuda", "driver", "cuda_driver", "cuda_runtime", "cudart", "cuda_helpers",
                                     "nvrtc", "cuda_stream_adapter", "stream_adapter"})


def raw_cuda(qual: str) -> bool:
    """Whether `qual` names something of the CUDA bindings beyond RAW_CUDA_MODULES and RAW_CUDA_OK."""
    name = qual.split("()")[0]
    if name.startswith("cutlass.") and not name.startswith(RAW_CUDA_ROOTS):
        parts = name.split(".")
        return bool(CUTLASS_DRIVER_SEGMENTS & set(parts[1:])) and parts[-1] not in ("CUstream", "CUresult")
    if not name.startswith(RAW_CUDA_ROOTS) or name in RAW_CUDA_MODULES:
        return False
    return not any(name == ok or name.startswith(ok + ".") for ok in RAW_CUDA_OK)

# Attributes of frames, tracebacks, generators, coroutines and code objects (f_back, tb_frame,
# gi_frame, co_consts, ...), taken from the running interpreter and a fixed list.
_FRAME_TYPES = (
    types.FrameType, types.TracebackType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
    types.CodeType,
)
FRAME_ATTRS = frozenset(
    {n for t in _FRAME_TYPES for n in dir(t) if n.split("_")[0] in ("f", "tb", "gi", "cr", "ag", "co")} | {
        "f_back", "f_locals", "f_globals", "f_code", "f_builtins", "f_trace", "f_lasti", "f_lineno", "tb_frame",
        "tb_next", "tb_lasti", "tb_lineno", "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended",
        "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "cr_suspended", "ag_frame", "ag_code",
        "ag_await", "ag_running", "ag_suspended", "co_consts", "co_code", "co_names", "co_varnames",
        "co_filename", "co_name", "co_qualname", "co_freevars", "co_cellvars", "co_flags", "co_linetable",
    }
)
# Attribute names that reach into frames, code objects, closures, the class hierarchy, the objects
# behind bound methods, or pickling's reconstruction functions, whatever object they are read from.
# `__class__`, `__name__`, `__qualname__`, `__module__` and `__doc__` pass: a class or a string leads
# nowhere without one of these.
INTROSPECTION_ATTRS = FRAME_ATTRS | frozenset({
    "__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__mro__", "mro", "__bases__",
    "__base__", "__wrapped__", "__defaults__", "__kwdefaults__", "__loader__", "__spec__", "__traceback__",
    "__import__", "cell_contents", "__self__", "__func__", "__objclass__", "__reduce__", "__reduce_ex__",
    "__getstate__", "__setstate__", "__getnewargs__", "__getnewargs_ex__", "__build_class__",
})
# Module names a kernel never reads as an attribute of a value the checks cannot follow (an exception's
# args, a generator's sent value): `<unknown>.os` is taken to be a module smuggled past them.
MODULE_LIKE_ATTRS = frozenset({
    "os", "posix", "nt", "sys", "builtins", "__builtin__", "subprocess", "importlib", "inspect", "gc", "ctypes",
    "_ctypes", "socket", "threading", "_thread", "multiprocessing", "pickle", "marshal", "runpy", "pkgutil", "pty",
    "shutil", "tempfile", "pathlib",
})
# Global names of a module that give its loader, spec or the interpreter's namespace.
INTROSPECTION_GLOBALS = frozenset({"__builtins__", "__loader__", "__spec__", "__build_class__"})
# PyTorch's dispatch machinery: guards that switch the Python dispatch key off (ops run under them skip the op
# recorder, a TorchDispatchMode, so PyTorch computes unseen), the mode stacks, the dispatcher's TLS and the C
# module they live in. No kernel needs them. Refused as an attribute of any object the candidate did not define
# and as a string naming one (getattr, attrgetter), whatever the checks know of the object it is read from (red
# team, 2026-12-05: torch reached through dict keys, generators, decorators, descriptors and a dozen more
# constructs the name resolution cannot follow, then `._C._DisableTorchDispatch`, or the public
# `torch.ExcludeDispatchKeyGuard`: torch.softmax computed unseen, accepted on 11 trials).
# (Plain `dispatch` is left out: triton.language.core.dispatch is Triton's, and the interpreter's checks own it.)
# `redispatch` and `with_keyset` (a keyword of torch.library's impl): an op run below the keys a kernel is handed,
# past the recorder's (red team, 2026-12-05, accepted).
DISPATCH_MACHINERY = re.compile(
    r"Dispatch|_dispatch|[Rr]edispatch|[Kk]ey_?[Ss]et|[Tt]orch_?[Ff]unction|TLSSnapshot|^_.*_modes?(_|$)|^_C$|^_op_dk$")
# Attribute names that do one thing whatever they are read from: rule for each.
# NumPy's and DLPack's buffer protocols: an object of the candidate's own that offers one hands NumPy (or
# torch) any memory it names, a tensor's data_ptr() included (red team, 2026-12-03: softmax computed in NumPy
# through a class with __array_interface__ set to the input's address, accepted on 11 trials). Refused
# wherever the name appears: defined, assigned, read, or as a string.
BUFFER_PROTOCOL = frozenset({"__array_interface__", "__array_struct__", "__array__", "__cuda_array_interface__",
                             "__dlpack__", "__buffer__"})
ATTR_RULES: dict[str, str] = {
    "load_library": "ctypes",
    **{n: "torch_compute" for n in BUFFER_PROTOCOL},
    "__annotations__": "eval_exec",  # its keys become source text in the code dataclasses generates and runs
    # a Python function called on every element, with no operator dispatched (the recorder sees nothing);
    # refused wherever they appear: a generator built in __init__ ran them inside forward (red team,
    # 2026-12-03: softmax in `math` through apply_, accepted on 11 trials)
    **dict.fromkeys(("apply_", "map_", "map2_"), "torch_compute"),
    # whether kernels run under the interpreter (triton.knobs.runtime.interpret): a kernel branching on it runs
    # Python on the values on CPU and a copy when compiled (red team round 9, 2026-12-03, accepted)
    "interpret": "introspection",
    # torch's C base class: its methods (tolist, numpy, apply_) skip the worker's counters, which can only
    # wrap torch.Tensor's (a C type cannot be patched)
    **dict.fromkeys(("TensorBase", "_TensorBase"), "introspection"),
    # a stream asked whether it is being captured (torch.Stream.is_capturing, newer torch): see STREAM_CALLS
    "is_capturing": "stream_creation", "is_current_stream_capturing": "stream_creation",
    **{n: "file_io" for n in (
        "from_file fromfile tofile export_chrome_trace export_stacks export_memory_timeline debug_dump to_folder "
        "share_memory share_memory_ _share_fd_cpu_ _share_filename_cpu_ _new_shared _new_shared_fd_cpu "
        "_new_shared_filename_cpu _new_using_fd_cpu _new_using_filename_cpu _write_file _new_with_file "
        "_save_for_lite_interpreter __file__ __path__ __cached__"
    ).split()},
}
# Methods that write files when a library object has them (TorchScript modules, NumPy arrays): reported
# unless the candidate's own class defines them.
OUTSIDE_ATTR_RULES: dict[str, str] = {
    "save": "file_io", "dump": "file_io",
    # a compiled Triton kernel's launch internals: `ck.run(grid, stream, ck.function, ck.packed_metadata, ...)`
    # launches with no hook, on any stream (red-team review, 2026-12-02)
    **{n: "introspection" for n in ("function", "packed_metadata", "launcher_cls", "load_binary")},
}
# Global names that give the candidate's own path.
FILE_GLOBALS = frozenset({"__file__", "__cached__", "__path__"})
# Assigning these rewires an object, whoever owns it.
PATCH_ATTRS = frozenset({
    "__class__", "__code__", "__globals__", "__defaults__", "__kwdefaults__", "__dict__", "__annotations__",
})

# torch.library namespaces that belong to PyTorch itself.
TORCH_OP_NAMESPACES = frozenset({
    "aten", "prims", "prim", "_prims", "c10d", "_c10d_functional", "c10d_functional", "quantized",
    "_quantized", "sparse", "mkldnn", "_test", "profiler", "inductor", "higher_order", "cuda",
})

# Calling these makes an operator of the candidate's own from a function; the operator object is opaque,
# the function itself is checked as code that runs when an operator runs.
OP_WRAPPERS = frozenset({"torch.library.custom_op", "torch.library.triton_op"})

TORCH_AUTOGRAD_FUNCTION = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction",
})
TORCH_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
TORCH_CONTAINER_BASES = frozenset({
    "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.ParameterList", "torch.nn.ParameterDict",
})
TORCH_TENSOR_BASES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter"})

# Methods the forward path is expected to call on its tensors (allocation, views, moves, metadata).
TENSOR_NONTENSOR_METHODS = frozenset({
    "size", "stride", "numel", "nelement", "dim", "ndimension", "data_ptr", "element_size",
    "is_contiguous", "is_floating_point", "is_complex", "get_device", "storage_offset", "item",
    "__dlpack_device__", "is_pinned", "is_shared", "is_signed", "dim_order",
})
# A tensor's bytes as host Python values (bytes(), memoryview(), iteration): computing from them is host
# compute that no aten op shows on a CPU (red team, 2026-12-01: softmax in pure Python from the storage).
TENSOR_HOST_BYTES_METHODS = frozenset({"untyped_storage", "storage", "_typed_storage", "__dlpack__", "__array__",
                                       "__array_interface__", "__cuda_array_interface__"})
HOST_BYTES_BUILTINS = frozenset({"bytes", "bytearray", "memoryview"})
TENSOR_ALLOWED_METHODS = TENSOR_NONTENSOR_METHODS | frozenset({
    "view", "view_as", "reshape", "reshape_as", "permute", "transpose", "t", "contiguous", "expand",
    "expand_as", "squeeze", "unsqueeze", "flatten", "unflatten", "narrow", "select", "as_strided",
    "split", "chunk", "unbind", "movedim", "moveaxis", "swapaxes", "swapdims", "unfold", "to",
    "float", "half", "bfloat16", "double", "int", "long", "short", "bool", "byte", "char", "cuda",
    "cpu", "type", "type_as", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
    "new_tensor", "zero_", "fill_", "clone", "copy_", "detach", "detach_", "requires_grad_",
    "pin_memory", "view_dtype", "tensor_split", "resize_", "record_stream",
})
TENSOR_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})

# Tensor methods that compute; used when the receiver's type is not known.
TENSOR_COMPUTE_METHODS = frozenset((
    "abs abs_ absolute acos acosh addbmm addcdiv addcmul addmm addmv addr add_ all allclose amax "
    "amin aminmax angle any apply_ arccos arcsin arctan argmax argmin argsort asin asinh atan atan2 "
    "atanh baddbmm bernoulli bernoulli_ bincount bitwise_and bitwise_not bitwise_or bitwise_xor bmm "
    "ceil ceil_ clamp clamp_ clamp_max clamp_min clip clip_ cos cosh count_nonzero cross cummax "
    "cummin cumprod cumsum cumsum_ deg2rad diag diag_embed diff digamma dist div div_ divide dot "
    "eig eq equal erf erfc erfinv exp exp_ exp2 expm1 exponential_ fix flip fliplr flipud float_power "
    "floor floor_ floor_divide fmax fmin fmod frac gather gcd ge geometric_ ger greater gt "
    "hardshrink heaviside histc hypot i0 index_add index_add_ index_copy index_copy_ index_fill "
    "index_fill_ index_put index_put_ index_reduce index_select inner inverse isclose isfinite isinf "
    "isnan isneginf isposinf isreal kron kthvalue lcm ldexp le lerp lerp_ less lgamma log log10 "
    "log1p log2 log_ log_normal_ log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and "
    "logical_not logical_or logical_xor logit logsumexp lt lu map_ masked_fill masked_fill_ "
    "masked_scatter masked_scatter_ masked_select matmul matrix_exp matrix_power max maximum mean "
    "median min minimum mm mode msort mul mul_ multinomial multiply mv mvlgamma nan_to_num "
    "nan_to_num_ nanmean nanmedian nanquantile nansum ne neg neg_ negative nextafter nonzero norm "
    "normal_ not_equal outer pinverse polygamma positive pow pow_ prod put put_ qr quantile "
    "rad2deg random_ ravel reciprocal reciprocal_ relu relu_ remainder renorm repeat "
    "repeat_interleave roll rot90 round round_ rsqrt rsqrt_ scatter scatter_ scatter_add "
    "scatter_add_ scatter_reduce sgn sigmoid sigmoid_ sign signbit sin sinc sinh slogdet softmax "
    "sqrt sqrt_ square square_ std sub sub_ subtract sum sum_to_size svd take take_along_dim tan "
    "tanh tanh_ tensordot tile tolist numpy topk trace tril tril_ triu triu_ true_divide trunc uniform_ unique "
    "unique_consecutive var vdot where xlogy xlogy_ __add__ __radd__ __iadd__ __sub__ __rsub__ "
    "__isub__ __mul__ __rmul__ __imul__ __matmul__ __rmatmul__ __imatmul__ __truediv__ "
    "__rtruediv__ __itruediv__ __floordiv__ __rfloordiv__ __mod__ __pow__ __rpow__ __neg__ "
    "__abs__ __and__ __or__ __xor__ __invert__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ "
    "__lshift__ __rshift__ __getitem__ __setitem__"
).split())

# torch functions the forward path may call: name -> True when the result is a tensor.
TORCH_ALLOWED_CALLS: dict[str, bool] = {
    **{f"torch.{n}": True for n in (
        "empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange tensor "
        "as_tensor scalar_tensor from_numpy from_dlpack reshape permute transpose t squeeze unsqueeze "
        "flatten unflatten narrow select as_strided split chunk unbind movedim moveaxis swapaxes "
        "swapdims broadcast_to view_as_real view_as_complex detach clone tensor_split"
    ).split()},
    "torch.utils.dlpack.from_dlpack": True,
    **{f"torch.{n}": False for n in (
        "Size finfo iinfo device no_grad enable_grad inference_mode set_grad_enabled is_grad_enabled "
        "is_inference_mode_enabled is_tensor is_floating_point is_complex get_default_dtype "
        "result_type promote_types can_cast broadcast_shapes numel is_nonzero autocast is_autocast_enabled "
        "are_deterministic_algorithms_enabled is_deterministic_algorithms_warn_only_enabled "
        "get_autocast_dtype get_autocast_gpu_dtype amp.autocast amp.custom_fwd amp.custom_bwd "
        "cuda.amp.autocast cuda.amp.custom_fwd cuda.amp.custom_bwd"
    ).split()},
    **{f"torch.cuda.{n}": False for n in (
        "current_stream current_device get_device_properties get_device_capability get_device_name "
        "device device_of is_available device_count synchronize "
        "nvtx.range_push nvtx.range_pop nvtx.range nvtx.mark mem_get_info get_arch_list is_bf16_supported "
        "is_initialized Event"
    ).split()},
    "torch.utils.dlpack.to_dlpack": False,
    "torch.library.wrap_triton": False,
    "torch.compiler.is_compiling": False,
    "torch.compiler.is_dynamo_compiling": False,
    "torch.jit.is_scripting": False,
    "torch.jit.is_tracing": False,
    "torch.autograd.function.once_differentiable": False,
    "torch.get_device": False,
}

# torch names that are values (namespaces, dtypes, constants), never compute when mentioned.
TORCH_NAMESPACES = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.modules", "torch.cuda",
    "torch.cuda.amp", "torch.amp", "torch.autograd", "torch.autograd.function", "torch.library",
    "torch.ops", "torch.utils", "torch.utils.dlpack", "torch.linalg", "torch.fft", "torch.special",
    "torch.backends", "torch.testing", "torch.jit", "torch.compiler", "torch.types", "torch.version",
    "torch.cuda.nvtx", "torch.nn.parameter",
})
TORCH_CONSTANTS = frozenset((
    "float float16 float32 float64 double half bfloat16 int int8 int16 int32 int64 long short uint8 "
    "uint16 uint32 uint64 bool complex32 complex64 complex128 cfloat cdouble chalf float8_e4m3fn "
    "float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2 qint8 quint8 qint32 "
    "quint4x2 strided sparse_coo sparse_csr jagged contiguous_format channels_last channels_last_3d "
    "preserve_format inf nan pi e newaxis __version__ cuda hip git_version"
).split())

NN_MODULE_OK_METHODS = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "register_buffer", "register_parameter", "extra_repr", "training",
    "get_parameter", "get_buffer", "get_submodule", "__init__", "to", "cuda", "cpu", "float", "half",
    "double", "bfloat16", "type", "train", "eval", "requires_grad_", "zero_grad", "state_dict",
    "register_module", "add_module", "__setattr__", "__getattr__", "__repr__", "__dir__",
})
HOOK_PREFIXES = ("register_", "_register_")

BUILTIN_TENSOR_COMPUTE = frozenset({"sum", "max", "min", "abs", "pow", "round", "divmod", "sorted"})
OPERATOR_ALWAYS = frozenset({"matmul", "imatmul", "__matmul__"})
