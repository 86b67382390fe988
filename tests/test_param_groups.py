"""Every parameter of the registry has one place on a control surface: control/parameters/groups.py
puts each in exactly one group (a new look parameter without a group fails here, by name)."""

from __future__ import annotations

from collections import Counter

from swarm_instrument.control.parameters.groups import GROUPS, OTHER, grouped
from swarm_instrument.control.parameters.registry import REGISTRY


def test_every_parameter_is_in_exactly_one_group():
    placed = Counter(name for _, names in GROUPS for name in names)
    registry = [p.name for p in REGISTRY]
    missing = [name for name in registry if name not in placed]
    twice = sorted(name for name, times in placed.items() if times > 1)
    unknown = sorted(set(placed) - set(registry))
    assert not missing, f"parameters in no group of control/parameters/groups.py: {missing}"
    assert not twice, f"parameters in more than one group: {twice}"
    assert not unknown, f"groups name parameters the registry lacks: {unknown}"


def test_groups_are_named_once_and_none_is_empty():
    names = [group for group, _ in GROUPS]
    assert len(names) == len(set(names)) and OTHER not in names
    assert all(params for _, params in GROUPS)
    assert {"swarm", "look", "camera", "audio", "tempo"} <= set(names)


def test_the_page_gets_every_parameter_once_even_one_the_table_lacks(monkeypatch):
    import swarm_instrument.control.parameters.groups as groups

    laid_out = [name for _, names in grouped() for name in names]
    assert sorted(laid_out) == sorted(p.name for p in REGISTRY)
    # A parameter added to the registry before the table: still on the page, under "other".
    monkeypatch.setattr(groups, "GROUPS", tuple((g, tuple(n for n in names if n != "fog"))
                                                for g, names in GROUPS))
    assert groups.grouped()[-1] == (OTHER, ["fog"])
