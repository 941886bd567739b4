"""The families of programs `pocketbert export` makes (ONNX, Core ML, Core AI, ExecuTorch), one record each: the
names a recipe or the command line gives its programs, what is built when none are given, and how a choice is
refused.

The names live here, not in export/, so that a recipe (and a ladder's every rung) is refused for a name that does
not exist when it is read, before any training. How each program is built and gated is export's
(export/programs/variants.py, one entry per name; tests/export/test_variant_applicability.py holds the two to each other).
Whether a program suits a student is the program's and the architecture's (Variant.applies_to): a family's choice
rule is given it as `applies`.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable, Optional

from pocketbert.core.errors import ExportError


@dataclass(frozen=True)
class ExportFamily:
    name: str                    # the variants table's family (Variant.family)
    title: str                   # as messages name it: "Core ML"
    program: str                 # one of its programs, in a refusal: "Core ML variant"
    names: tuple[str, ...]       # as export.<recipe_key> and the command line spell them
    recipe_key: Optional[str]    # the export section's list; None: the family is always built whole
    misfit_remedy: str = ""      # how a user leaves out a program that does not apply
    variant_prefix: str = ""     # the variants table's key is prefix + name
    defaults: Optional[tuple[str, ...]] = None  # the list unset: these, where they apply (None: every name)
    required: tuple[str, ...] = ()  # every choice includes these
    packages: tuple[str, ...] = ()  # modules a choice of any program needs
    install: str = ""               # how to get them

    def variant(self, name: str) -> str:
        """The variants table's key of one of this family's names."""
        return self.variant_prefix + name

    def check_names(self, names: Optional[list[str]], where: str) -> None:
        """ValueError (the recipe's validators make it one line) for a name the family does not have."""
        unknown = [n for n in names or () if n not in self.names]
        if unknown:
            raise ValueError(f"{where}{self.recipe_key}: unknown {', '.join(map(repr, unknown))}; the names are "
                             f"{', '.join(self.names)}")

    def choose(self, given: Optional[list[str]], from_recipe: Optional[list[str]], applies: Callable[[str], bool],
               task: str, architecture: str, notes: bool = True) -> list[str]:
        """The programs to build: as given on the command line (one that does not apply is refused); else the
        recipe's list less what this student cannot take, with a note, since a recipe's list is written for
        BERT-family students; with neither, the defaults it takes. task and architecture name the student in
        messages; notes: False checks the choice without the note (a check ahead of the export)."""
        if given is not None:
            names = list(given)
        elif from_recipe is not None:
            names = list(from_recipe)
            misfits = [n for n in names if n in self.names and not applies(n)]
            if misfits and notes:
                print(f"note: the recipe's {self.title} {', '.join(misfits)} left out: it does not apply to a "
                      f"{architecture} student", file=sys.stderr)
            names = [n for n in names if n not in misfits]
        else:
            names = [n for n in (self.names if self.defaults is None else self.defaults) if applies(n)]
        self.refuse(names, applies, task, architecture)
        return names

    def refuse(self, names: list[str], applies: Callable[[str], bool], task: str, architecture: str) -> None:
        """An ExportError, before any work, for a choice that names a program the family lacks, leaves out one it
        requires, names one that does not apply to this student, or needs a package this machine lacks."""
        unknown = [n for n in names if n not in self.names]
        if self.required and (unknown or any(n not in names for n in self.required)):
            raise ExportError(f"export.{self.recipe_key} must include {', '.join(self.required)} and only "
                              f"{', '.join(self.names)} (got {names})")
        if unknown:
            raise ExportError(f"export.{self.recipe_key} takes only {', '.join(self.names)} (got {names}); [] leaves "
                              f"{self.title} out")
        misfits = [n for n in names if not applies(n)]
        if misfits:
            raise ExportError(f"{self.program} {', '.join(misfits)} does not apply to a {task} {architecture} "
                              f"student: {self.misfit_remedy}")
        if names and any(importlib.util.find_spec(m) is None for m in self.packages):
            raise ExportError(f"the {self.title} variants need {self.install}, or set export.{self.recipe_key} to []")


ONNX = ExportFamily(
    "onnx", "ONNX", "ONNX model",
    ("onnx", "onnx-fp16", "onnx-int8", "onnx-qdq", "ort", "ort-qdq", "onnx-text", "onnx-text-int8", "ort-text",
     "onnx-qa", "onnx-qa-int8", "ort-qa"),
    None)
COREML = ExportFamily(
    "coreml", "Core ML", "Core ML variant",
    ("fp16", "int8", "6bit", "4bit", "int4-block", "fixed", "enumerated", "ane", "ane-int8", "ane-6bit", "ane-4bit",
     "classifier"),
    "coreml_variants", "leave it out of export.coreml_variants",
    required=("fp16",))  # the app folders' program of last resort: every student takes it
# The iOS folder's default Core ML program, the first of these the export made and gated: the Neural Engine's layout
# (one fixed-length function per length); else enumerated lengths (apple/coremltools#2730 warns of them); else fp16.
IOS_APP_PROGRAMS = ("ane", "enumerated", "fp16")
COREAI = ExportFamily(
    "coreai", "Core AI", "Core AI variant",
    ("fp16", "int8", "6bit", "4bit", "ane", "ane-6bit"),
    "coreai_variants", "set export.coreai_variants to []", variant_prefix="coreai-",
    # 6-bit palettes, as the Core ML default: on the default run 13.2 MB against 34.7 MB for fp16, SST-2 dev 0.8704
    # against the student's 0.8681; int8 (17.6 MB, 0.8727) and 4-bit (8.8 MB, 0.8670, 98.3 % agreement) on request.
    defaults=("fp16", "6bit"),
    packages=("coreai_torch", "coreai"),
    install="coreai-torch and coreai-core: run `pip install 'pocketbert[coreai]'` (or `make install`)")
EXECUTORCH = ExportFamily(
    "executorch", "ExecuTorch", "ExecuTorch program",
    ("pte", "pte-int8", "pte-coreml"),
    "executorch_variants", "set export.executorch_variants to []")

FAMILIES = (ONNX, COREML, COREAI, EXECUTORCH)  # the export's build order
CHOSEN = tuple(f for f in FAMILIES if f.recipe_key is not None)  # the families a recipe chooses programs of
