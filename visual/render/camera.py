"""Camera maths for the renderer: projection, view, frustum planes and mouse picking.

Pure numpy, so it is tested without a GPU. Matrices follow OpenGL: column vectors, a point p
goes to clip space as `M @ [x, y, z, 1]`, depth -1..1. Upload a matrix to GLSL with
`matrix_bytes(M)` (GLSL reads column-major). `OrbitCamera` circles the swarm slowly on its own
so a performer gets motion and depth without touching anything. Main thread only.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

WORLD_UP = np.array([0.0, 1.0, 0.0])
BALL_FROM_RMS = math.sqrt(5.0 / 3.0)  # a uniform ball's radius is this times its RMS radius
FLY_REACH = 0.35  # fly mode: the loop's radius, as a fraction of the framing distance


def perspective(fov_y_degrees: float, aspect: float, near: float, far: float) -> np.ndarray:
    """The OpenGL perspective projection (gluPerspective): a 4x4 float64 matrix."""
    if not (0.0 < fov_y_degrees < 180.0 and aspect > 0.0 and 0.0 < near < far):
        raise ValueError(f"bad projection: fov {fov_y_degrees}, aspect {aspect}, "
                         f"near {near}, far {far}")
    f = 1.0 / math.tan(math.radians(fov_y_degrees) / 2.0)
    m = np.zeros((4, 4))
    m[0, 0] = f / aspect
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2.0 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def _cross(a: tuple[float, float, float], b: tuple[float, float, float]
           ) -> tuple[float, float, float]:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _unit(v: tuple[float, float, float]) -> tuple[float, float, float]:
    length = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    return (v[0] / length, v[1] / length, v[2] / length)


def view_rows(eye, target, up=WORLD_UP) -> tuple[tuple[float, ...], ...]:
    """The view matrix's first three rows (gluLookAt; the fourth is 0, 0, 0, 1), plain floats
    on three numbers (numpy's cross and norm on 3-vectors cost ten times more)."""
    ex, ey, ez = eye  # floats, or numpy's (the arithmetic is the same)
    tx, ty, tz = target
    forward = _unit((tx - ex, ty - ey, tz - ez))
    side = _cross(forward, tuple(up))
    if math.sqrt(side[0] ** 2 + side[1] ** 2 + side[2] ** 2) < 1e-9:
        side = _cross(forward, (0.0, 0.0, 1.0))  # looking straight along `up`: any side
    side = _unit(side)
    true_up = _cross(side, forward)
    rows = (side, true_up, (-forward[0], -forward[1], -forward[2]))
    (ax, ay, az), (bx, by, bz), (cx, cy, cz) = rows
    return ((ax, ay, az, -(ax * ex + ay * ey + az * ez)),
            (bx, by, bz, -(bx * ex + by * ey + bz * ez)),
            (cx, cy, cz, -(cx * ex + cy * ey + cz * ez)))


def look_at(eye, target, up=WORLD_UP) -> np.ndarray:
    """The view matrix of a camera at `eye` looking at `target` (gluLookAt): world -> eye."""
    return np.array([*view_rows(eye, target, up), (0.0, 0.0, 0.0, 1.0)])


def projected_rows(fov_y_degrees: float, aspect: float, near: float, far: float,
                   view: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
    """perspective(...) @ the view matrix whose first three rows are `view`, row by row in
    plain floats: the projection has five numbers that are not 0, so the product is a few
    multiplications (numpy's on 4x4 costs more in calls than in arithmetic)."""
    if not (0.0 < fov_y_degrees < 180.0 and aspect > 0.0 and 0.0 < near < far):
        raise ValueError(f"bad projection: fov {fov_y_degrees}, aspect {aspect}, "
                         f"near {near}, far {far}")
    f = 1.0 / math.tan(math.radians(fov_y_degrees) / 2.0)
    a, b = (far + near) / (near - far), 2.0 * far * near / (near - far)
    side, up, back = view
    g = f / aspect
    return ((g * side[0], g * side[1], g * side[2], g * side[3]),
            (f * up[0], f * up[1], f * up[2], f * up[3]),
            (a * back[0], a * back[1], a * back[2], a * back[3] + b),
            (-back[0], -back[1], -back[2], -back[3]))


def frustum_planes(view_projection: np.ndarray) -> np.ndarray:
    """The six planes (left, right, bottom, top, near, far) of a view-projection matrix.

    Gribb and Hartmann's extraction: each row is (nx, ny, nz, w) with |n| = 1 and n pointing
    inwards, so a sphere of `radius` at p is at least partly inside plane k when
    dot(n, p) + w >= -radius (the seed's CSCull test). Shape (6, 4), float64.
    """
    return np.array(plane_rows(np.asarray(view_projection, float).tolist()))


def plane_rows(m) -> list[tuple[float, float, float, float]]:
    """`frustum_planes` of a matrix given as four rows, in plain floats."""
    m0, m1, m2, m3 = m
    planes = []
    for row, sign in ((m0, 1.0), (m0, -1.0), (m1, 1.0), (m1, -1.0), (m2, 1.0), (m2, -1.0)):
        x, y, z, w = (m3[0] + sign * row[0], m3[1] + sign * row[1], m3[2] + sign * row[2],
                      m3[3] + sign * row[3])
        length = math.sqrt(x * x + y * y + z * z)
        planes.append((x / length, y / length, z / length, w / length))
    return planes


def sphere_visible(planes: np.ndarray, points: np.ndarray, radius: float) -> np.ndarray:
    """Which of `points` (N, 3) pass every plane within `radius`: the cull test, in numpy."""
    points = np.asarray(points, float).reshape(-1, 3)
    distances = points @ planes[:, :3].T + planes[:, 3]
    return np.all(distances >= -radius, axis=1)


def matrix_bytes(m: np.ndarray) -> bytes:
    """A 4x4 matrix as a GLSL mat4 uniform wants it: float32, column-major."""
    return np.asarray(m, np.float32).T.tobytes()


@dataclass
class OrbitCamera:
    """A camera circling `target` slowly: azimuth = azimuth + orbit_speed * time.

    `time` is set by the frame loop (simulated seconds), so a fixed-step offline render orbits
    the same way every run. `distance` is the zoom; `zoom()` scales it within limits. A flock
    settles much smaller than it spawns, drifts after the lure, and a big one fills its
    container, so `follow()` eases the target onto the swarm's centre and the distance to frame
    its size (the renderer's `swarm_center` and `swarm_radius`), the user's zoom kept on top as
    `zoom_scale`.
    """

    distance: float = 110.0        # frames the spawn sphere (30) with room to spread to 60
    fov_y: float = 50.0            # degrees, vertical
    elevation: float = 20.0        # degrees above the orbit's equator
    azimuth: float = 0.0           # degrees at time 0
    orbit_speed: float = 4.0       # degrees a second; 0 holds the camera still
    target: np.ndarray = field(default_factory=lambda: np.zeros(3))
    near: float = 0.5
    far_margin: float = 1000.0     # the far plane sits this far beyond the target
    min_distance: float = 5.0
    max_distance: float = 5000.0
    time: float = 0.0
    zoom_scale: float = 1.0        # the user's zoom relative to the framed distance
    fill: float = 0.6              # follow() makes the swarm this fraction of the frame's height
    follow_seconds: float = 1.5    # follow()'s time constant moving in: slow enough not to breathe
    catch_seconds: float = 0.3     # moving out, and re-centring: quick, so nothing leaves the frame
    mode: str = "orbit"            # orbit | follow | fly | top (see `eye`)
    distance_scale: float = 1.0    # the performer's camera_distance, on top of the framing
    heading: float = 0.0           # follow mode: degrees, eased towards the swarm's travel

    def fit_distance(self, radius: float) -> float:
        """The distance at which a ball of `radius` spans `fill` of the frame's height."""
        half_angle = math.atan(self.fill * math.tan(math.radians(self.fov_y) / 2.0))
        return radius / math.sin(half_angle)

    def follow(self, rms_radius: float | None, dt: float, center=None) -> None:
        """Keep a swarm framed: the orbit's `target` eases onto `center` and `distance` to fit
        a ball of this RMS radius (the renderer's swarm_center and swarm_radius), counting how
        far the centre still is from the target, so a swarm that rushes off (a loud passage,
        the lure) is never out of the frame while the camera catches up. Out and re-centring
        are quick (`catch_seconds`), in is slow (`follow_seconds`): the picture never
        breathes. None (nothing measured yet) leaves that part still."""
        dt = max(dt, 0.0)
        slow = 1.0 - math.exp(-dt / self.follow_seconds)
        quick = 1.0 - math.exp(-dt / self.catch_seconds)
        offset = 0.0
        # plain floats on three numbers (numpy on 3-vectors costs more than the arithmetic)
        if center is not None:
            gx, gy, gz = float(center[0]), float(center[1]), float(center[2])
            if math.isfinite(gx) and math.isfinite(gy) and math.isfinite(gz):
                tx, ty, tz = float(self.target[0]), float(self.target[1]), float(self.target[2])
                mx, my, mz = (gx - tx) * quick, (gy - ty) * quick, (gz - tz) * quick
                tx, ty, tz = tx + mx, ty + my, tz + mz
                self.target = np.array((tx, ty, tz))
                if self.mode == "follow" and math.hypot(mx, mz) > 1e-4 * self.distance:
                    travel = math.degrees(math.atan2(-mx, -mz))  # behind the travel
                    turn = (travel - self.heading + 180.0) % 360.0 - 180.0
                    self.heading += turn * (1.0 - math.exp(-dt / 2.0))  # a slow, smooth turn
                offset = math.sqrt((gx - tx) ** 2 + (gy - ty) ** 2 + (gz - tz) ** 2)
        if rms_radius is None or not math.isfinite(rms_radius) or rms_radius <= 0.0:
            return
        goal = (self.fit_distance(rms_radius * BALL_FROM_RMS + offset) * self.zoom_scale
                * self.distance_scale)
        goal = min(max(goal, self.min_distance), self.max_distance)
        self.distance += (goal - self.distance) * (quick if goal > self.distance else slow)

    def orbit_angle(self, time: float | None = None) -> float:
        """The azimuth in degrees at `time` (default: the camera's own time)."""
        t = self.time if time is None else time
        return (self.azimuth + self.orbit_speed * t) % 360.0

    def zoom(self, factor: float) -> None:
        """Move in (factor < 1) or out (> 1), kept within [min_distance, max_distance];
        follow() keeps the same zoom relative to the swarm."""
        self.distance = float(np.clip(self.distance * factor, self.min_distance,
                                      self.max_distance))
        self.zoom_scale = float(np.clip(self.zoom_scale * factor, 0.02, 50.0))

    def _direction(self, azimuth_degrees: float, elevation_degrees: float
                   ) -> tuple[float, float, float]:
        azimuth, elevation = math.radians(azimuth_degrees), math.radians(elevation_degrees)
        return (math.cos(elevation) * math.sin(azimuth), math.sin(elevation),
                math.cos(elevation) * math.cos(azimuth))

    @property
    def eye(self) -> np.ndarray:
        """Where the camera is, in the swarm's space (`eye_point`, as an array)."""
        return np.array(self.eye_point())

    def eye_point(self) -> tuple[float, float, float]:
        """Where the camera is, in plain floats. orbit: circling the target at `elevation`;
        top: facing the xy plane, where a 2D swarm flies (from +z, turning slowly about the
        view, see `up`); follow: behind the swarm's travel (`heading`), swaying with the
        orbit's clock; fly: on a loop through the swarm, a third of the framing distance from
        its centre, rising and falling."""
        tx, ty, tz = np.asarray(self.target, float).tolist()  # plain floats
        if self.mode == "top":
            return (tx, ty, tz + self.distance)
        if self.mode == "follow":
            sway = 25.0 * math.sin(math.radians(self.orbit_angle()) * 3.0)
            direction, reach = self._direction(self.heading + sway, 12.0), self.distance
        elif self.mode == "fly":
            angle = self.orbit_angle() * 3.0  # three times the orbit's pace
            rise = 18.0 * math.sin(math.radians(angle) * 0.7)
            dx, dy, dz = self._direction(angle, rise)
            reach = self.distance
            return (tx + dx * reach * FLY_REACH, ty + dy * reach * FLY_REACH,
                    tz + dz * reach * FLY_REACH)
        else:
            direction = self._direction(self.orbit_angle(), self.elevation)
            reach = self.distance
        return (tx + direction[0] * reach, ty + direction[1] * reach,
                tz + direction[2] * reach)

    def look_at_point(self) -> np.ndarray:
        """Where the camera looks: the target, or (fly) ahead along its loop."""
        return np.array(self._aim())

    def _aim(self) -> tuple[float, float, float]:
        if self.mode != "fly":
            return tuple(np.asarray(self.target, float).tolist())
        ahead = copy.copy(self)
        ahead.time = self.time + 25.0 / max(abs(self.orbit_speed), 1e-3)  # ~25 degrees on
        return ahead.eye_point()

    @property
    def forward(self) -> np.ndarray:
        """The unit direction the camera looks in."""
        d = self.look_at_point() - self.eye
        return d / np.linalg.norm(d)

    @property
    def up(self) -> np.ndarray:
        """Which way is up on screen: the world's, or (top) turning with the orbit's clock."""
        return np.array(self._up())

    def _up(self) -> tuple[float, float, float]:
        if self.mode != "top":
            return (0.0, 1.0, 0.0)
        roll = math.radians(self.orbit_angle() * 0.5)  # half the orbit's pace
        return (math.sin(roll), math.cos(roll), 0.0)

    def view(self, eye: np.ndarray | None = None) -> np.ndarray:
        """The view matrix (`eye`: the camera's position, when already known)."""
        return look_at(self.eye_point() if eye is None else eye, self._aim(), self._up())

    def projection(self, aspect: float) -> np.ndarray:
        return perspective(self.fov_y, aspect, self.near, self.distance + self.far_margin)

    def view_projection(self, aspect: float, eye: np.ndarray | None = None) -> np.ndarray:
        return np.array(self.view_projection_rows(aspect, eye))

    def view_projection_rows(self, aspect: float, eye=None) -> tuple[tuple[float, ...], ...]:
        """projection @ view, its four rows in plain floats (what a frame uploads)."""
        rows = view_rows(self.eye_point() if eye is None else eye, self._aim(), self._up())
        return projected_rows(self.fov_y, aspect, self.near, self.distance + self.far_margin,
                              rows)

    def frustum(self, aspect: float) -> np.ndarray:
        """The (6, 4) normalised planes the cull pass tests against."""
        return frustum_planes(self.view_projection(aspect))

    def screen_ray(self, x: float, y: float, width: int, height: int
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The ray (origin, unit direction) through pixel (x, y), origin at the bottom left as
        pyglet reports the mouse."""
        ndc = np.array([2.0 * x / width - 1.0, 2.0 * y / height - 1.0])
        inverse = np.linalg.inv(self.view_projection(width / height))
        near = inverse @ np.array([ndc[0], ndc[1], -1.0, 1.0])
        far = inverse @ np.array([ndc[0], ndc[1], 1.0, 1.0])
        near, far = near[:3] / near[3], far[:3] / far[3]
        direction = far - near
        return near, direction / np.linalg.norm(direction)

    def screen_to_swarm(self, x: float, y: float, width: int, height: int) -> np.ndarray:
        """The point under pixel (x, y) on the plane through `target` that faces the camera:
        where the mouse puts the lure. The plane always faces the camera, so the ray meets it."""
        origin, direction = self.screen_ray(x, y, width, height)
        normal = self.forward
        target = np.asarray(self.target, float)
        t = np.dot(target - origin, normal) / np.dot(direction, normal)
        return origin + direction * t
