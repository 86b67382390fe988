"""The agents' meshes and where one gives way to the other (the level of detail): a cone or a
dart near the camera (streaks and glows: a quad the shader turns to the camera), a single point
far away, where the mesh is a few pixels and looks the same. `MeshSet` packs them all into one
vertex buffer. Pure functions: any thread.
"""

from __future__ import annotations

import math

import numpy as np


def cone_mesh(sides: int = 6, tip: float = 1.0, tail: float = -0.8, radius: float = 0.28
              ) -> tuple[np.ndarray, np.ndarray]:
    """A closed cone along +x with flat normals: `sides` side faces and a fan for the base.

    Returns (positions, normals), (V, 3) float32, three vertices a triangle; every vertex lies
    within distance 1 of the origin, which is what the cull radius assumes.
    """
    # Half a step round: a flat face, not an edge, faces sideways, so a side view shows 3 faces.
    angles = np.linspace(0.0, 2.0 * math.pi, sides, endpoint=False) + math.pi / sides
    ring = np.stack([np.full(sides, tail), radius * np.cos(angles), radius * np.sin(angles)], 1)
    apex = np.array([tip, 0.0, 0.0])
    triangles = [(apex, ring[k], ring[(k + 1) % sides]) for k in range(sides)]
    triangles += [(ring[0], ring[k + 1], ring[k]) for k in range(1, sides - 1)]  # the base
    positions = np.array(triangles).reshape(-1, 3)
    normals = []
    for a, b, c in triangles:
        n = np.cross(b - a, c - a)
        n /= np.linalg.norm(n)
        if np.dot(n, (a + b + c) / 3.0 - np.array([0.15, 0.0, 0.0])) < 0:
            n = -n  # point outwards from a point inside the cone
        normals += [n, n, n]
    return positions.astype(np.float32), np.array(normals, np.float32)


def lod_distance(agent_size: float, lod_pixels: float, height: int, fov_y: float) -> float:
    """The distance beyond which an agent looks smaller than `lod_pixels` on a frame `height`
    pixels tall: there a cone is a few pixels and one point looks the same, far cheaper."""
    if lod_pixels <= 0.0:
        return 1e30
    pixels_per_unit_at_1 = height / (2.0 * math.tan(math.radians(fov_y) / 2.0))
    return agent_size * pixels_per_unit_at_1 / lod_pixels


def arrow_mesh() -> tuple[np.ndarray, np.ndarray]:
    """A dart along +x (a fish seen from afar): swept wings, a notched tail and a low ridge
    above and below, flat normals; within distance 1 of the origin."""
    tip, notch = np.array([1.0, 0, 0]), np.array([-0.4, 0, 0])
    left, right = np.array([-0.75, 0.5, 0]), np.array([-0.75, -0.5, 0])
    top, bottom = np.array([-0.2, 0, 0.16]), np.array([-0.2, 0, -0.16])
    triangles = []
    for ridge in (top, bottom):
        faces = [(tip, left, ridge), (tip, ridge, right), (left, notch, ridge),
                 (notch, right, ridge)]
        if ridge is bottom:
            faces = [(a, c, b) for a, b, c in faces]
        triangles += faces
    positions = np.array(triangles).reshape(-1, 3)
    normals = []
    for a, b, c in triangles:
        n = np.cross(b - a, c - a)
        n /= np.linalg.norm(n)
        if np.dot(n, (a + b + c) / 3.0 - np.array([-0.1, 0.0, 0.0])) < 0:
            n = -n
        normals += [n, n, n]
    return positions.astype(np.float32), np.array(normals, np.float32)


def quad() -> tuple[np.ndarray, np.ndarray]:
    """Two triangles over [-1, 1]^2 in x, y: the shader turns it to the camera (streak, glow)
    and reads x, y as the place on it."""
    corners = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, -1, 0], [1, 1, 0], [-1, 1, 0]],
                       np.float32)
    return corners, np.tile(np.array([0.0, 0.0, 1.0], np.float32), (6, 1))


SHAPES = ("cone", "arrow", "streak", "glow")
BILLBOARDS = frozenset({"streak", "glow"})  # quads the shader turns to the camera


class MeshSet:
    """Every shape in one vertex buffer: the near meshes (quad, cone, arrow) and the far one, a
    single point (drawn as GL_POINTS, its size on screen set by the shader: one vertex an agent
    where a far triangle took three, what the H200's modest raster front end is short of at
    millions). `commands(shape)` gives the near and far draws' (vertex count, first vertex)."""

    def __init__(self) -> None:
        point = (np.zeros((1, 3), np.float32), np.array([[0.0, 0.0, 1.0]], np.float32))
        parts = {"quad": quad(), "cone": cone_mesh(), "arrow": arrow_mesh(), "point": point}
        self.ranges: dict[str, tuple[int, int]] = {}
        first = 0
        for name, (positions, _) in parts.items():
            self.ranges[name] = (len(positions), first)
            first += len(positions)
        self.vertices = np.hstack([np.vstack([p for p, _ in parts.values()]),
                                   np.vstack([n for _, n in parts.values()])]).astype(np.float32)

    def commands(self, shape: str) -> tuple[tuple[int, int], tuple[int, int]]:
        """((near count, near first), (far count, far first)) for `shape`."""
        near = self.ranges["quad"] if shape in BILLBOARDS else self.ranges[shape]
        return near, self.ranges["point"]
