"""The registry's parameters in groups, as a control surface lays them out (the web remote's
page: control/web/web_remote.py): a table group -> names, in the order a performer reaches for them.

Every parameter of control/parameters/registry.py belongs to exactly one group
(tests/test_param_groups.py checks it). A parameter added to the registry but not yet here still
reaches the page, in OTHER at the end, so a new knob is never unreachable while this table catches
up. Pure data, any thread.
"""

from __future__ import annotations

from swarm_instrument.control.parameters.registry import REGISTRY

OTHER = "other"

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("swarm", ("count", "max_speed", "max_force", "neighbor_radius", "separation_radius",
               "spawn_radius", "contain_radius", "boundary", "dimensions")),
    ("rules", ("separation_weight", "alignment_weight", "cohesion_weight", "seek_weight",
               "obstacle_weight", "separation", "alignment", "cohesion", "seek",
               "containment", "lure_radius")),
    ("look", ("shape", "blend", "palette", "hue_shift", "color_by", "slow_color", "fast_color",
              "telegraph_color", "agent_size", "size_by_speed", "glow", "fog", "trail")),
    ("picture", ("post", "exposure", "tonemap", "bloom", "bloom_radius", "bloom_threshold",
                 "feedback", "feedback_zoom", "feedback_rotate", "feedback_drift_x",
                 "feedback_drift_y")),
    ("camera", ("camera", "camera_distance", "orbit_speed")),
    ("audio", ("audio_speed_boost",)),
    ("tempo", ("bpm", "tempo_min", "tempo_max", "tempo_source", "quantize")),
    ("presets", ("morph_seconds", "crossfade", "crossfade_a", "crossfade_b")),
    ("engine", ("neighbor_cap", "lod_pixels", "target_fps", "pin_render_scale", "pin_post",
                "pin_count", "pin_neighbors")),
)


def grouped() -> list[tuple[str, list[str]]]:
    """(group, names) for the page: the table's groups with the names the registry has (in
    the table's order), then OTHER with any registry name the table lacks. Empty groups are
    left out."""
    known = {p.name for p in REGISTRY}
    placed: set[str] = set()
    groups = []
    for group, names in GROUPS:
        present = [name for name in names if name in known and name not in placed]
        placed.update(present)
        if present:
            groups.append((group, present))
    rest = [p.name for p in REGISTRY if p.name not in placed]
    if rest:
        groups.append((OTHER, rest))
    return groups
