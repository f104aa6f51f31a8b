"""Sphinx directives that write the fault and checker references from the code, so there is one source.

``.. chaos-fault-kinds::`` renders every declared fault kind (``chaos.model.faults``, with its injection from
``chaos.nemesis.kinds.kinds()``), by family (the family modules' docstrings), each with its summary, the roles it
accepts, the fields and typed params it owns, its traits (what the checkers read of it) and the backend capability
it needs; ``.. chaos-checkers::`` renders each checker of ``chaos.checkers.registry.CHECKERS`` from its module's
docstring. A kind or checker added to the code
appears in the site without an edit here; a docstring that is not valid reStructuredText fails the strict
build (``make docs``: ``-W``).
"""

from __future__ import annotations

import sys

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.parsing import nested_parse_to_nodes


def _section(title: str, char: str) -> list[str]:
    return [title, char * len(title), ""]


def _literal_list(values) -> str:
    return ", ".join(f"``{v}``" for v in sorted(values)) or "none"


class FaultKinds(SphinxDirective):
    """Every fault kind, grouped by family: its declaration (``chaos.model.faults``) and its injection module."""

    def run(self) -> list[nodes.Node]:
        from chaos.model.faults.base import FaultSpec
        from chaos.model.target import Role
        from chaos.nemesis.kinds import kinds

        all_roles = frozenset(Role)
        common = set(FaultSpec.model_fields)
        by_family: dict[str, list] = {}
        for k in kinds().values():
            by_family.setdefault(k.family, []).append(k)
        lines: list[str] = []
        for family, members in by_family.items():  # the declarations' order: FAMILIES
            lines += _section(f"{family} faults", "-")
            # the family's module docstrings: what its kinds are (the model) and how they are injected, healed
            # and verified (the nemesis)
            modules = {sys.modules[k.spec.__module__] for k in members} | {sys.modules[k.inject.__module__]
                                                                           for k in members}
            for module in sorted(modules, key=lambda m: m.__name__):
                lines += [f"*Module* ``{module.__name__}``.", ""]
                lines += (module.__doc__ or "").splitlines() + [""]
            for k in members:
                spec = k.spec
                lines += _section(f"``{k.name}``", "~")
                lines += [k.summary.replace("*", r"\*") + ".", ""]
                targets = "every role" if k.targets == all_roles else _literal_list(r.value for r in k.targets)
                lines += [f":targets: {targets}", f":model: ``{spec.__module__}.{spec.__name__}``"]
                own = sorted(set(spec.model_fields) - common - {"params"})
                if own:
                    lines += [f":fields it owns: {_literal_list(own)}"]
                if "params" in spec.model_fields:
                    params = spec.model_fields["params"].annotation
                    required = [n for n, f in params.model_fields.items() if f.is_required()]
                    optional = [n for n, f in params.model_fields.items() if not f.is_required()]
                    lines += [f":required params: {_literal_list(required)}", f":optional params: {_literal_list(optional)}"]
                lines += [f":traits: {_literal_list(t.value for t in k.traits)}"]
                lines += [f":needs capability: ``{k.capability}``" if k.capability
                          else ":needs capability: none beyond process and link faults"]
                lines += [""]
                for example in spec.examples:
                    lines += [".. code-block:: yaml", "", f"   {example}", ""]
        return nested_parse_to_nodes(self.state, "\n".join(lines), source="chaos.model.faults")


class Checkers(SphinxDirective):
    """Every checker, from its module's docstring."""

    def run(self) -> list[nodes.Node]:
        from chaos.checkers.registry import CHECKERS

        lines: list[str] = []
        for name, check in CHECKERS.items():
            module = sys.modules[check.__module__]
            lines += _section(f"``{name.value}``", "-")
            lines += [f"*Module* ``{module.__name__}``.", ""]
            lines += (module.__doc__ or "(no docstring)").splitlines() + [""]
        return nested_parse_to_nodes(self.state, "\n".join(lines), source="chaos.checkers.registry")


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("chaos-fault-kinds", FaultKinds)
    app.add_directive("chaos-checkers", Checkers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
