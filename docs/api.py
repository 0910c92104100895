"""Build the API reference from the docstrings (``make docs``): ``python docs/api.py OUTDIR MODULE...``.

pdoc renders the modules (reStructuredText docstrings) into OUTDIR. The build fails, listing every problem, on any
warning pdoc or an imported module raises (a module that does not import, a name in ``__all__`` or a type annotation
that does not resolve) and on a cross-reference in a docstring (``:class:`X```, ``:func:`X``` ...) that names
nothing importable: pdoc would render it as plain code, without a link, and say nothing.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pdoc
import pdoc.doc
import pdoc.extract
import pdoc.render

ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc|const):`~?\.?([\w.]+)`")


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute reachable from the longest importable module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif isinstance(obj, type) and attr in instance_attributes(obj):
                return attr == parts[-1]
            else:
                return False
        return True
    return False


def instance_attributes(cls: type) -> set[str]:
    """The attributes an instance of ``cls`` gets in ``__init__`` (``self.x: T = ...``), as pdoc documents them."""
    return set(pdoc.doc.Class(cls.__module__, cls.__qualname__, cls, (cls.__module__, cls.__qualname__)).members)


def broken_references(doc: pdoc.doc.Doc[Any]) -> list[str]:
    """The docstring cross-references of ``doc`` and its own members that resolve nowhere: as written, or in the
    module and class (and their outer classes) where the docstring is documented or where it is defined."""
    scopes = [""]
    for module, qualname in {(doc.modulename, doc.qualname), doc.taken_from}:
        scopes += [f"{module}."] + [f"{module}.{qualname.rsplit('.', i)[0]}." for i in range(qualname.count(".") + 1)
                                    if qualname]
    problems = [f"{module}.{qualname}: {match.group(0)} names nothing importable"
                for match in ROLE.finditer(doc.docstring)
                if not any(resolves(scope + match.group(1)) for scope in scopes)]
    if isinstance(doc, pdoc.doc.Module | pdoc.doc.Class):
        for member in doc.own_members:
            problems += broken_references(member)
    return problems


def build(outdir: Path, modules: list[str]) -> list[str]:
    """Render ``modules`` into ``outdir``; the problems found (none: the reference is complete)."""
    pdoc.render.configure(docformat="restructuredtext", show_source=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # jsii's own deprecation notices on import (as in pyproject's pytest filter): not ours to fix
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="jsii")
        problems = [problem for name in pdoc.extract.walk_specs(modules)
                    for problem in broken_references(pdoc.doc.Module.from_name(name))]
        pdoc.pdoc(*modules, output_directory=outdir)
    return [f"warning: {w.category.__name__}: {w.message}" for w in caught] + problems


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python docs/api.py OUTDIR MODULE...", file=sys.stderr)
        return 2
    outdir, modules = Path(argv[0]), argv[1:]
    problems = build(outdir, modules)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"API reference: {len(problems)} problem(s), see above", file=sys.stderr)
        return 1
    print(f"API reference of {', '.join(modules)}: {outdir / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
