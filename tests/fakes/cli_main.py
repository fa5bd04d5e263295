"""The real `kernelagent` command line with the fake verifier plugged in, for tests that need a process
(SIGKILL and Ctrl-C): `python -m tests.fakes.cli_main optimize op.py --provider anthropic ...`.

Only `kernelagent.tools.optimize.agent_deps` is replaced (by `agent_kit.fake_deps`); the command, its
flags, the provider, the SDK, the loop and the store are the real ones. Set FAST_RETRY=1 to use the
test retry numbers.
"""

from __future__ import annotations

import os

from kernelagent.agent import providers
from kernelagent.cli.app import main
from kernelagent.tools import optimize
from tests.fakes.agent_kit import FAST_RETRY, fake_deps


def _fast(make):  # noqa: ANN001, ANN202 - wraps make_provider
    def make_fast(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        kwargs.setdefault("retry", FAST_RETRY)
        return make(*args, **kwargs)
    return make_fast


if __name__ == "__main__":
    optimize.agent_deps = fake_deps
    if os.environ.get("FAST_RETRY"):
        providers.make_provider = _fast(providers.make_provider)
    main()
