"""`python -m kernelagent.cli`: the same as the `kernelagent` command."""

from kernelagent.cli.app import main

main()
