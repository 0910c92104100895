"""``python -m hyperwarm.planner routing simulate|tune``: stand-alone entry point."""
import sys

from .routing_cli import main

if __name__ == "__main__":
    sys.exit(main())
