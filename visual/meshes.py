"""The agent's two meshes and where one gives way to the other (the level of detail): a cone near
the camera, a single triangle turned to face it far away, where the cone is a few pixels and
looks the same. Pure functions: any thread.
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


def far_triangle() -> tuple[np.ndarray, np.ndarray]:
    """The far level of detail: one triangle (x forward, y across); the shader turns its plane
    to hold the view direction, and flips the +z normal towards the camera. Its outline is the
    cone's seen side-on (tip 1, tail -0.8, half-width 0.28), so switching detail does not show."""
    positions = np.array([[1.0, 0.0, 0.0], [-0.8, 0.28, 0.0], [-0.8, -0.28, 0.0]], np.float32)
    normals = np.tile(np.array([0.0, 0.0, 1.0], np.float32), (3, 1))
    return positions, normals


def lod_distance(agent_size: float, lod_pixels: float, height: int, fov_y: float) -> float:
    """The distance beyond which an agent looks smaller than `lod_pixels` on a frame `height`
    pixels tall: there a cone is a few pixels and one triangle looks the same, far cheaper."""
    if lod_pixels <= 0.0:
        return 1e30
    pixels_per_unit_at_1 = height / (2.0 * math.tan(math.radians(fov_y) / 2.0))
    return agent_size * pixels_per_unit_at_1 / lod_pixels
