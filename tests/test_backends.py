"""Both GPU backends play the same roles (visual/backends.py): a swarm, a renderer and a post
chain with the members and call signatures the show depends on, so the show never names a
backend's class and a change to one role that the other lacks fails here."""

from __future__ import annotations

import inspect

import pytest

from swarm_instrument.control.parameters.registry import Params
from swarm_instrument.visual.backends import (
    BACKEND_CLASSES,
    PostRole,
    RendererRole,
    SwarmRole,
    backend_classes,
)
from swarm_instrument.visual.gpu.context import BACKENDS


def role_members(role: type) -> dict[str, object]:
    """The protocol's own members: its methods, properties and annotated attributes."""
    members = {name: value for name, value in vars(role).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    members.update({name: None for name in role.__annotations__})
    return members


def check_role(instance: object, role: type) -> None:
    assert isinstance(instance, role), f"{type(instance).__name__} is not a {role.__name__}"
    for name, member in role_members(role).items():
        assert hasattr(instance, name), f"{type(instance).__name__} lacks {name}"
        if inspect.isfunction(member):
            assert callable(getattr(instance, name)), (
                f"{type(instance).__name__}.{name} is not a method")
            want = inspect.signature(member)
            got = inspect.signature(getattr(type(instance), name))
            assert list(got.parameters) == list(want.parameters), (
                f"{type(instance).__name__}.{name}{got} is not {role.__name__}.{name}{want}")
            for key, parameter in want.parameters.items():
                assert got.parameters[key].default == parameter.default, (
                    f"{type(instance).__name__}.{name}: {key}'s default differs")


def test_every_backend_is_in_the_table():
    assert set(BACKEND_CLASSES) == set(BACKENDS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_plays_every_role(ctx, backend):
    swarm_class, renderer_class = backend_classes(backend)
    swarm = swarm_class(ctx, Params({"count": 300}).as_dict())
    renderer = renderer_class(ctx)
    try:
        assert swarm.backend == renderer.backend == backend
        check_role(swarm, SwarmRole)
        check_role(renderer, RendererRole)
        check_role(renderer._post, PostRole)
    finally:
        renderer.release()
        swarm.release()


def test_a_member_that_is_not_there_fails_the_check(ctx):
    """The check itself: a swarm whose `resize` is not a method fails it."""
    swarm_class, _ = backend_classes("4.3")

    class Lacking(swarm_class):
        resize = None

    swarm = Lacking(ctx, Params({"count": 64}).as_dict())
    try:
        with pytest.raises(AssertionError, match="Lacking (is not a SwarmRole|.*resize)"):
            check_role(swarm, SwarmRole)
    finally:
        swarm.release()
