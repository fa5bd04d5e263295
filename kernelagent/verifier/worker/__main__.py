"""`python -m kernelagent.verifier.worker WORKDIR`: one verifier worker process."""

from kernelagent.verifier.worker.main import main

main()
