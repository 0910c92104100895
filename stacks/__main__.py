"""``python -m stacks``: this app's command line, the library's ``hyperwarm`` commands plus ``plan``.

``plan cache`` reads this app's cdk.json, so it lives with the app rather than in the library.
"""

import sys

from hyperwarm import cli

COMMANDS = {**cli.COMMANDS, "plan": ("stacks.plan", "plan model caches: NVMe fit and cold vs warm scale-out time")}

if __name__ == "__main__":
    sys.exit(cli.main(commands=COMMANDS, prog="python -m stacks"))
