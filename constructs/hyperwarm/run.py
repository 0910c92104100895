"""``python -m hyperwarm.run APP.py [ARGS...]``: run a CDK app on the Node of hyperwarm's ``node`` extra, whatever
order the app imports ``aws_cdk`` and ``hyperwarm`` in.

jsii starts its Node process when ``aws_cdk`` is first imported and takes the one ``JSII_NODE`` names, else
``node`` from PATH. This entry point sets ``JSII_NODE`` (:func:`hyperwarm.use_bundled_node`) before the app's
first line runs, so an import sorter that puts ``import aws_cdk`` first changes nothing. cdk.json's ``app``
command: ``python -m hyperwarm.run app.py``.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from hyperwarm._node import use_bundled_node


def main(argv: Sequence[str] | None = None) -> None:
    """Run the app ``argv[0]`` as ``__main__`` with ``argv`` as its ``sys.argv``, as ``python APP.py`` would."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.exit("usage: python -m hyperwarm.run APP.py [ARGS...]")
    use_bundled_node()
    app = Path(args[0])
    sys.argv = args
    sys.path.insert(0, str(app.resolve().parent))  # what `python APP.py` puts first: the app's own folder
    runpy.run_path(str(app), run_name="__main__")


if __name__ == "__main__":
    main()
