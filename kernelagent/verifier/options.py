"""Options of one verification (what the CLI flags and the agent's budget map onto)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field


@dataclass
class VerifyOptions:
    device: str = "auto"            # auto | cpu | cuda
    seeds: int = 3                  # fresh seeds for the correctness trials (>= 1)
    timeout: float = 300.0          # wall-clock seconds for each worker process
    timing: bool = True             # time candidate and baselines (GPU only)
    profile: bool = False           # Nsight Compute metrics on every kernel the candidate launches
    sanitize: bool = False          # compute-sanitizer memcheck + racecheck
    memory_limit_mb: int | None = None   # host memory cap for a worker (None: 3/4 of the memory available)
    cpu_max_elements: int = 1 << 20      # on CPU, input sets larger than this are skipped (interpreter speed)
    secret: int = field(default_factory=lambda: secrets.randbits(31))  # seed base, never shown to candidates
    keep_workdir: bool = False
    static_policy: bool = True      # only the sandbox's own tests turn this off, to test the dynamic layers alone
    confinement: str = "auto"       # OS walls around every worker: auto (strongest available, the report says what
                                    # is missing) | strict (ConfinementError naming the missing layer) | off (tests)
    tripwires: bool = True          # Python audit hook + thread guard; tests turn them off to show the walls alone hold
    backend: str | None = None      # "triton" | "cute": a candidate in the other language is rejected
    cache: bool = True              # reuse reference packs across processes ($KERNELAGENT_HOME/cache/refs)
