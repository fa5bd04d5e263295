"""What the parent and a worker say to each other: typed requests, the late delivery, the fresh-input plan.

Standard library only: both sides import it (the worker imports only stdlib, torch, triton and cutlass).
A request is one JSON line `{"role": ..., **fields}`; `decode_request` turns it back into its dataclass.

Timing sees new data on every call: the seeds of the fresh draws derive from a random key the parent
draws (`TimingPlan.key`), never from the trials' secret, and the candidate receives the key only after its
constructor ran (`Delivery`). Which calls are checked against the reference stays with the parent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class Role(StrEnum):
    REFERENCE = "reference"   # run the problem: trials, reference outputs, baselines, check fingerprints
    CANDIDATE = "candidate"   # run the untrusted candidate on the trials, then time it on fresh draws
    SINGLE = "single"         # one forward under a tool (ncu, compute-sanitizer)
    AOT = "aot"               # compile the interpreter's launches for sm_90a (no GPU)
    MATCH = "match"           # run library references on a problem's inputs (the offline path)


# Files in a worker's read-only `-in` folder, linked there by the parent.
META_FILE = "meta.json"          # the trials' descriptions (nothing secret)
INIT_FILE = "init.pt"            # constructor arguments and parameter states
PROBLEM_FILE = "problem.py"      # the problem, for fresh draws (delivered after the constructor)
DELIVERY_FILE = "delivery.json"  # the Delivery (after the constructor)
CONSTRUCTED_FILE = "constructed"  # written by the worker in its `-out` folder once ModelNew exists
IMPORTED_FILE = "imported"  # a pooled GPU worker's folder: imports done, waiting for its turn on the GPU
GPU_TURN_FILE = "gpu-turn"  # put there by the parent while no timing runs: make the CUDA context now
TIMING_WANTED_FILE = "timing-wanted"  # written by a candidate worker in `-out`: checked, ready to be timed
TIMING_TURN_FILE = "timing-turn"      # put in `-in` by the parent once the GPU is this worker's alone


def inputs_file(trial_id: int) -> str:
    return f"inputs_{trial_id}.pt"


@dataclass(frozen=True)
class TimingPlan:
    """Fresh inputs for every timed call: call i draws `get_inputs()` under `seed(i)`, and its outputs are
    fingerprinted with `fingerprints` random ±1 projections seeded by `mask_seed`."""

    key: str
    draws: int = 4096
    fingerprints: int = 3

    @staticmethod
    def new(draws: int = 4096) -> TimingPlan:
        return TimingPlan(key=secrets.token_hex(16), draws=draws)

    def seed(self, i: int) -> int:
        digest = hashlib.blake2b(f"{self.key}:{i % self.draws}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") >> 1  # torch seeds are 63-bit here

    @property
    def mask_seed(self) -> int:
        return self.seed(-1)


@dataclass(frozen=True)
class CheckPlan:
    """Which timed calls the parent compares against the reference (never sent to the candidate)."""

    positions: tuple[int, ...]

    @staticmethod
    def new(guaranteed: int, extra_span: int, count: int = 12, extra: int = 8) -> CheckPlan:
        rng = secrets.SystemRandom()
        first = rng.sample(range(guaranteed), min(count, guaranteed))
        later = rng.sample(range(guaranteed, guaranteed + extra_span), min(extra, extra_span))
        return CheckPlan(tuple(sorted(first + later)))


# Calls every candidate's timing makes with fresh draws, at least (see measure.timing.MIN_CALLS).
GUARANTEED_CALLS = 32
# The later checked calls fall before this one; a measurement goes on until it, unless its repetitions
# are done first (a slow kernel's few), so that none of the later checks is left out by a short run.
CHECKED_SPAN = 256


@dataclass
class ReferenceRequest:
    problem: str
    device: str
    secret: int
    seeds: int
    out_dir: str              # the worker writes `pack/` (what candidates get) and `ref/` (parent only) here
    cpu_max_elements: int | None = None
    timing: bool = False
    plan: TimingPlan | None = None
    checks: CheckPlan | None = None
    role: Role = Role.REFERENCE


@dataclass
class CandidateRequest:
    candidate: str
    device: str
    in_dir: str
    out_dir: str
    backend: str = "unknown"
    timing: bool = False
    timing_turn: bool = False  # wait for the parent's TIMING_TURN_FILE before timing (checks share the GPU)
    main_set: bool = True     # SINGLE: the main input set (else the first trial)
    deny_read: list[str] = field(default_factory=list)  # the audit hook's tripwire (the walls are the OS's)
    role: Role = Role.CANDIDATE


@dataclass
class AotRequest:
    candidate: str
    requests: list[dict[str, Any]]
    out_dir: str
    deny_read: list[str] = field(default_factory=list)
    role: Role = Role.AOT


@dataclass
class MatchRequest:
    problem: str
    entries: list[dict[str, Any]]   # {"name", "reference"}: library references to compare with the problem
    device: str
    out_dir: str
    seed: int = 0
    cap: int = 1 << 20
    role: Role = Role.MATCH


@dataclass
class Delivery:
    """What a candidate worker receives once its constructor has run."""

    plan: TimingPlan | None
    trial_ids: list[int]


Request = ReferenceRequest | CandidateRequest | AotRequest | MatchRequest
_BY_ROLE: dict[Role, type] = {Role.REFERENCE: ReferenceRequest, Role.CANDIDATE: CandidateRequest,
                              Role.SINGLE: CandidateRequest, Role.AOT: AotRequest, Role.MATCH: MatchRequest}


def plain_json(value: Any, max_depth: int, max_items: int) -> bool:
    """Whether `value` (read from a worker that ran candidate code) is plain JSON data no deeper than
    max_depth and with at most max_items values: safe to copy, encode and hand to another worker."""
    todo, seen = [(value, 0)], 0
    while todo:
        v, depth = todo.pop()
        seen += 1
        if depth > max_depth or seen > max_items:
            return False
        if type(v) is dict:
            if not all(type(k) is str for k in v):
                return False
            todo.extend((x, depth + 1) for x in v.values())
        elif type(v) is list:
            todo.extend((x, depth + 1) for x in v)
        elif v is not None and type(v) not in (str, int, float, bool):
            return False
    return True


def encode(obj: Any) -> str:
    """One JSON line for a request or a delivery."""
    return json.dumps(dataclasses.asdict(obj), default=str)


def decode_request(line: str | dict[str, Any]) -> Request:
    data = json.loads(line) if isinstance(line, str) else line
    role = Role(data["role"])
    cls = _BY_ROLE[role]
    return _build(cls, data)


def decode_delivery(text: str) -> Delivery:
    return _build(Delivery, json.loads(text))


def read_plan(path: Path) -> TimingPlan | None:
    """The timing plan the parent saved with the reference (`plan.json`), or None where there is none."""
    return _build(TimingPlan, json.loads(path.read_text())) if path.exists() else None


def _build(cls: type, data: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in data.items() if k in names}
    if kwargs.get("plan") is not None:
        kwargs["plan"] = TimingPlan(**kwargs["plan"])
    if kwargs.get("checks") is not None:
        kwargs["checks"] = CheckPlan(tuple(kwargs["checks"]["positions"]))
    if "role" in kwargs:
        kwargs["role"] = Role(kwargs["role"])
    return cls(**kwargs)


# --- facts a candidate worker reports (data only: the parent decides what they mean) ---------------------

@dataclass
class Transfers:
    """Device-to-host traffic during a forward (host compute shows as input data leaving the GPU)."""

    d2h_bytes: int = 0
    scalar_reads: int = 0   # `.item()`-style reads of single elements
    foreign_streams: int = 0  # ops and kernel launches on a CUDA stream other than the caller's
    host_read_bytes: int = 0  # tensor data read into Python or NumPy (numpy, __array__, tolist, DLPack), any device

    def add(self, other: Transfers) -> None:
        self.d2h_bytes += other.d2h_bytes
        self.scalar_reads += other.scalar_reads
        self.foreign_streams += other.foreign_streams
        self.host_read_bytes += other.host_read_bytes


@dataclass
class CallFacts:
    """One checked call of the candidate's forward (and backward)."""

    launches: int = 0
    ops: dict[str, int] = field(default_factory=dict)   # every op dispatched, with counts
    opened: list[str] = field(default_factory=list)     # library ops whose bodies were recorded like forward
    transfers: Transfers = field(default_factory=Transfers)
    mutated: list[int] = field(default_factory=list)    # input leaves whose values changed
    types: list[str] = field(default_factory=list)      # "tensor" | "subclass:X" | "other:X" | "int" ...
    structure: str = ""                                 # tensorio.describe of what forward returned
    aliases: bool = False                               # an output shares storage with an input
    devices: list[str] = field(default_factory=list)
    late_writes: bool = False                           # outputs changed after the stream finished
    grad_leaves: int = 0                                # tensors the backward differentiated (engine sums)
    copied: list[int] = field(default_factory=list)     # outputs that are PyTorch's copies of input data


@dataclass
class TimingFacts:
    candidate: dict[str, Any]            # measure.timing.Timing.to_dict()
    mode: str                            # forward | forward+backward
    draws: str                           # how the calls got their values (fresh.DrawMode.describe)
    calls: int = 0
    launches: int | None = None          # launches during the timed calls (None under graph replay)
    ops: dict[str, int] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)
    transfers: Transfers = field(default_factory=Transfers)
    error: str = ""                      # timing could not run as planned (the report says why)


@dataclass
class CandidateFacts:
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    io: dict[str, float] = field(default_factory=lambda: {"save_seconds": 0.0, "saved": 0})
    params: dict[str, list[str]] = field(default_factory=dict)
    trials: dict[int, CallFacts] = field(default_factory=dict)
    probe_calls: dict[str, CallFacts] = field(default_factory=dict)  # the probes' calls, on trial 0's inputs
    cache_probe: dict[str, Any] | None = None
    threads: dict[str, Any] = field(default_factory=dict)
    patched: list[str] = field(default_factory=list)
    late_imports: list[str] = field(default_factory=list)
    launch_stats: dict[str, Any] = field(default_factory=dict)
    blocked: list[str] = field(default_factory=list)
    compile: dict[str, Any] = field(default_factory=dict)
    compile_only: dict[str, str] | None = None
    cute_hooks: bool = False
    timing: TimingFacts | None = None
    failure: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CandidateFacts:
        data = dict(data)
        data["trials"] = {int(k): _call_facts(v) for k, v in (data.get("trials") or {}).items()}
        data["probe_calls"] = {str(k): _call_facts(v) for k, v in (data.get("probe_calls") or {}).items()}
        t = data.get("timing")
        if t is not None:
            t = dict(t)
            t["transfers"] = Transfers(**(t.get("transfers") or {}))
            data["timing"] = TimingFacts(**t)
        names = {f.name for f in dataclasses.fields(CandidateFacts)}
        return CandidateFacts(**{k: v for k, v in data.items() if k in names})


def _call_facts(v: dict[str, Any]) -> CallFacts:
    v = dict(v)
    v["transfers"] = Transfers(**(v.get("transfers") or {}))
    return CallFacts(**v)
