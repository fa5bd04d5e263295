"""A pooled GPU worker compiles its warm-up kernel before its GPU turn (worker.warmup.compile_ahead): the
compile and the launcher's build are host work, and they must not make a CUDA context, which is GPU work
kept for the turn. On the CPU the compile targets sm_90 with Triton's own ptxas; a stand-in driver raises
if torch's CUDA functions are asked (the GPU run checks the context itself: tests/gpu/test_gpu_session.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = r'''
import importlib, json
config = importlib.import_module("triton.runtime.driver").driver
from triton.backends.compiler import GPUTarget
from kernelagent.verifier.worker import warmup as W

def torch_asked(*args, **kwargs):
    raise AssertionError("torch was asked for CUDA state")

class StandIn:  # the CUDA driver's interface, whose torch-backed functions must not be called
    get_current_device = get_current_stream = get_device_capability = staticmethod(torch_asked)
    def __init__(self):
        self.launchers = []
        self.launcher_cls = lambda src, metadata: self.launchers.append(metadata.name)
    def get_current_target(self):
        major, minor = self.get_device_capability(self.get_current_device())
        return GPUTarget("cuda", major * 10 + minor, 32)

stand_in = StandIn()
config.set_active(stand_in)
W._capability = lambda device=0: (9, 0)
W.primary_context_active = lambda device=0: False
result = W.compile_ahead()
kernels = W._copy.device_caches[0][0]
print(json.dumps({"result": result, "launchers": stand_in.launchers, "keys": [str(k) for k in kernels],
                  "restored": stand_in.get_current_device is StandIn.get_current_device}))
'''


def test_the_warm_up_kernel_is_compiled_for_the_launch_without_torchs_cuda_state(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["result"]["ok"] is True and out["result"]["context"] is False, out
    assert out["launchers"] == ["_copy"]  # its launcher built once, into the cache the launch reads
    # one compile, specialised as the launch in warm() is: 16-byte aligned pointers, n = 100
    assert len(out["keys"]) == 1 and "('*fp32', 'D'), ('*fp32', 'D'), ('i32', '')" in out["keys"][0], out["keys"]
    assert out["restored"], "the driver's own functions are put back"
