"""The halving every exhaustive tokenizer check narrows a differing text with: each probe it names differs on its
own, and a lone difference in a second half costs one run a halving."""

from __future__ import annotations

import math

from pocketbert.export.checks.tokenizer_probes import halved_down

PROBES = 400  # the probes of one text of the text-in check (tokenizer_check.PROBES_PER_TEXT)


def counted(bad: set, together: tuple = ()):
    """A `differs` over lists of probes that says "ids" where a list holds a probe of `bad`, or all of `together`,
    and the number of runs it was asked for."""
    runs = []

    def differs(chunk: list) -> str | None:
        runs.append(len(chunk))
        found = bad & set(chunk) or (together and set(together) <= set(chunk))
        return "ids" if found else None
    return differs, runs


def test_a_lone_difference_in_second_halves_costs_one_run_a_halving():
    halvings = math.ceil(math.log2(PROBES))
    differs, runs = counted({PROBES - 1})
    assert halved_down(list(range(PROBES)), differs) == [(PROBES - 1, "ids")]
    # the whole, then the clean first half at each halving, and the probe alone at the last
    assert len(runs) == 1 + halvings + 1
    differs, runs = counted({0})  # in first halves, the second half must be checked too: two runs a halving
    assert halved_down(list(range(PROBES)), differs) == [(0, "ids")]
    assert len(runs) <= 1 + 2 * halvings


def test_what_the_caller_found_on_the_whole_is_not_asked_again():
    differs, runs = counted({3})
    assert halved_down(list(range(8)), differs, "ids") == [(3, "ids")]
    assert PROBES not in runs and 8 not in runs


def test_every_differing_probe_is_named_in_order_with_what_differs():
    bad = {0, 1, 2, 150, 151, 399}
    differs, _ = counted(bad)
    assert halved_down(list(range(PROBES)), differs) == [(p, "ids") for p in sorted(bad)]
    dense, runs = counted(set(range(16)))  # every probe differs: each one is checked alone
    assert halved_down(list(range(16)), dense) == [(p, "ids") for p in range(16)]
    assert runs.count(1) == 16


def test_a_difference_only_the_halves_together_make_names_no_probe():
    # a whole that differs while no probe differs alone: no probe is named (the caller names the whole text)
    differs, runs = counted(set(), together=(3, 4))
    assert halved_down(list(range(8)), differs) == []
    assert runs[0] == 8


def test_a_list_that_does_not_differ_is_one_run():
    differs, runs = counted(set())
    assert halved_down(list(range(PROBES)), differs) == []
    assert runs == [PROBES]
