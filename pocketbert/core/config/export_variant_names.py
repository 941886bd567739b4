"""The names of the Apple and ExecuTorch programs `pocketbert export` can make, as a recipe or a ladder spells them.

The variants themselves (how each is built and gated) are export's (export/variants.py); their names are here so
that a recipe, and a ladder's every rung, is refused for a name that does not exist when it is read, before any
training, and not when its export starts. tests/export/test_variant_applicability.py keeps the two in step.
"""

from __future__ import annotations

COREML = ("fp16", "int8", "6bit", "4bit", "int4-block", "fixed", "enumerated", "ane", "ane-int8", "ane-6bit",
          "ane-4bit", "classifier")
COREAI = ("fp16", "int8", "6bit", "4bit", "ane", "ane-6bit")
EXECUTORCH = ("pte", "pte-int8", "pte-coreml")


def check_names(coreml: list[str] | None, coreai: list[str] | None, where: str,
                executorch: list[str] | None = None) -> None:
    """ValueError (pydantic's validators turn it into the recipe's one-line error) for an unknown name."""
    for family, names, known in (("coreml_variants", coreml, COREML), ("coreai_variants", coreai, COREAI),
                                 ("executorch_variants", executorch, EXECUTORCH)):
        unknown = [n for n in names or () if n not in known]
        if unknown:
            raise ValueError(f"{where}{family}: unknown {', '.join(map(repr, unknown))}; the names are "
                             f"{', '.join(known)}")
