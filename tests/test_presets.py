"""Presets without a GPU: the file format's round trips, morphs and the fader's crossfade,
every kind of damaged file, safe writes interrupted at every step, slots and the recovery file.

Pure file and dict work on tmp_path; a crash is simulated by raising (or by os._exit in a child
process) before each step of the write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swarm_instrument.control.looks.atomic import STEPS, atomic_write_text, backup_path
from swarm_instrument.control.looks.files import FileProblem
from swarm_instrument.control.looks.preset_bank import BUNDLED_DIR, PresetBank
from swarm_instrument.control.looks.presets import (
    FORMAT,
    VERSION,
    Preset,
    PresetError,
    apply_preset,
    differences,
    differs,
    load_preset,
    preset_from_show,
    preset_to_json,
    save_preset,
)
from swarm_instrument.control.looks.recovery import RecoveryWriter, load_recovery
from swarm_instrument.control.parameters.modulation import Route
from swarm_instrument.control.parameters.morph import Morph, blend_routes, blend_value, crossfade
from swarm_instrument.control.parameters.registry import REGISTRY, Param, Params

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted(BUNDLED_DIR.glob("[1-9]-*.json"))
MAPPINGS = sorted(BUNDLED_DIR.glob("midi*.json"))


def other_value(p: Param):
    """A valid value of `p` that is not its default (so a round trip proves it was kept)."""
    if p.kind == "bool":
        return not p.default
    if p.kind == "choice":
        return next(c for c in p.choices if c != p.default)
    if p.kind == "color":
        return (0.125, 0.3, 0.9)
    if p.kind == "int":
        return int(p.lo + 1 if p.default != p.lo + 1 else p.lo + 2)
    return p.lo + (p.hi - p.lo) * 0.3183098861837907  # an awkward float: repr must survive


def everything_changed() -> Preset:
    values = {p.name: other_value(p) for p in REGISTRY}
    routes = [Route("low", "max_speed", 6.5), Route("onset", "separation_weight", -0.25)]
    return Preset("every knob", values, routes, about="all parameters off their defaults")


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


# ---- round trips -------------------------------------------------------------------------------

def test_save_load_keeps_every_parameter_colour_and_route(tmp_path):
    preset = everything_changed()
    save_preset(tmp_path / "all.json", preset)
    loaded = load_preset(tmp_path / "all.json")
    assert loaded.values == preset.values  # exact: floats through JSON by repr
    for p in REGISTRY:
        assert type(loaded.values[p.name]) is type(preset.values[p.name]), p.name
    assert isinstance(loaded.values["slow_color"], tuple)
    assert loaded.routes == preset.routes
    assert (loaded.name, loaded.about, loaded.path) == (preset.name, preset.about,
                                                       tmp_path / "all.json")


def test_file_is_readable_json_in_registry_order_with_colour_lists(tmp_path):
    path = save_preset(tmp_path / "look.json", everything_changed())
    text = path.read_text()
    data = json.loads(text)
    assert (data["format"], data["version"], data["name"]) == (FORMAT, VERSION, "every knob")
    assert list(data["params"]) == [p.name for p in REGISTRY]
    assert data["params"]["fast_color"] == [0.125, 0.3, 0.9]
    assert data == preset_to_json(everything_changed())
    assert '    "trail": ' in text  # one parameter a line: a person can read and diff it


def test_apply_and_from_show_round_trip_through_params():
    params = Params()
    routes = apply_preset(everything_changed(), params)
    again = preset_from_show("again", params, routes)
    assert again.values == everything_changed().values
    assert routes == everything_changed().routes
    assert not differs(again, params, routes)


def test_missing_parameters_take_defaults_and_the_old_form_still_reads(tmp_path):
    path = write(tmp_path / "old-look.json", {"params": {"trail": 0.5},
                                              "routes": [{"source": "low", "param": "trail",
                                                          "amount": 0.2}]})
    preset = load_preset(path)
    assert preset.name == "old-look"
    assert preset.values["trail"] == 0.5
    assert all(preset.values[p.name] == p.default for p in REGISTRY if p.name != "trail")
    params = Params({"max_speed": 30.0})
    apply_preset(preset, params)
    assert params["max_speed"] == 8.0  # a preset is the whole look, not a patch


def test_apply_keeps_what_it_is_told_to():
    params = Params({"count": 777})
    apply_preset(everything_changed(), params, keep=("count",))
    assert params["count"] == 777
    assert params["trail"] == everything_changed().values["trail"]
    assert not differs(everything_changed(), params, everything_changed().routes,
                       keep=("count",))


def test_differs_names_what_changed_since_recall():
    params = Params()
    preset = preset_from_show("base", params, [Route("low", "trail", 0.3)])
    routes = list(preset.routes)
    assert differences(preset, params, routes) == []
    params["max_speed"] = 9.0
    params["slow_color"] = (0.0, 0.0, 0.0)
    assert differences(preset, params, routes) == ["max_speed", "slow_color"]
    assert differences(preset, Params(), []) == ["routes"]
    assert differs(preset, params, routes)


# ---- morph and crossfade -----------------------------------------------------------------------

def two_looks() -> tuple[Preset, Preset]:
    a = Preset("a", Params({"max_speed": 4.0, "trail": 0.0, "slow_color": (0.0, 0.2, 1.0),
                            "count": 1000, "boundary": "sphere", "dimensions": 3,
                            "alignment": True}).as_dict(),
               [Route("low", "max_speed", 4.0)])
    b = Preset("b", Params({"max_speed": 12.0, "trail": 0.9, "slow_color": (1.0, 0.6, 0.0),
                            "count": 3000, "boundary": "wrap", "dimensions": 2,
                            "alignment": False}).as_dict(),
               [Route("onset", "trail", 0.1)])
    return a, b


def test_morph_midpoint_blends_continuous_values_and_steps_the_rest_at_the_start():
    a, b = two_looks()
    morph = Morph(a.values, b, seconds=2.0, start_routes=a.routes)
    start, middle, end = morph.values_at(0.0), morph.values_at(1.0), morph.values_at(2.0)
    assert start["max_speed"] == 4.0 and middle["max_speed"] == pytest.approx(8.0)
    assert middle["trail"] == pytest.approx(0.45)
    assert middle["slow_color"] == pytest.approx((0.5, 0.4, 0.5))
    for values in (start, middle):  # switches, choices and count: the target's from t = 0
        assert (values["count"], values["boundary"], values["dimensions"],
                values["alignment"]) == (3000, "wrap", 2, False)
    assert end == b.values  # exactly the target at the end
    assert morph.values_at(99.0) == b.values
    assert 4.0 < morph.values_at(0.5)["max_speed"] < 6.0  # eased: slow to leave


def test_morph_is_monotonic_eased_and_reports_progress():
    a, b = two_looks()
    morph = Morph(a.values, b, seconds=1.0)
    speeds = [morph.values_at(t / 20)["max_speed"] for t in range(21)]
    assert speeds == sorted(speeds)
    assert speeds[1] - speeds[0] < speeds[10] - speeds[9]  # eases in
    assert morph.progress_at(0.0) == 0.0 and morph.progress_at(0.25) == 0.25
    assert morph.values_at(0.5)["max_speed"] == pytest.approx(8.0)
    assert morph.progress_at(1.1) == 1.0


def test_morph_routes_fade_amounts_and_end_exact():
    a, b = two_looks()
    morph = Morph(a.values, b, 2.0, start_routes=a.routes)
    assert morph.routes_at(0.0) == a.routes
    assert morph.routes_at(1.0) == [Route("low", "max_speed", 2.0), Route("onset", "trail", 0.05)]
    assert morph.routes_at(2.0) == b.routes


def test_morph_of_zero_seconds_is_a_jump_and_keep_is_left_alone():
    a, b = two_looks()
    morph = Morph(a.values, b, 0.0, keep=("count",))
    assert morph.progress_at(0.0) == 1.0
    values = morph.values_at(0.0)
    assert "count" not in values
    assert values == {k: v for k, v in b.values.items() if k != "count"}


def test_morph_to_a_partial_mapping_changes_only_those():
    a, _ = two_looks()
    morph = Morph(a.values, {"trail": 0.5}, 1.0)
    assert morph.changing == {"trail"}
    assert morph.values_at(0.5) == {**a.values, "trail": pytest.approx(0.25)}


def test_morph_and_crossfade_step_every_whole_number_at_once():
    """count, and any other int (slots, caps), never passes through values in between."""
    ints = [p for p in REGISTRY if p.kind == "int"]
    target = Preset("t", {**Params().as_dict(), **{p.name: other_value(p) for p in ints}})
    middle = Morph(Params().as_dict(), target, 2.0).values_at(0.1)
    faded = crossfade(preset_from_show("a", Params(), []), target, 0.5)
    for p in ints:
        assert middle[p.name] == faded[p.name] == other_value(p), p.name


def test_int_parameters_blend_rounded_and_colours_per_channel():
    knob = Param("knob", 0, "int", "a whole-number knob", 0, 100)
    assert blend_value(knob, 0, 9, 0.5) == 4 or blend_value(knob, 0, 9, 0.5) == 5
    assert isinstance(blend_value(knob, 0, 9, 0.3), int)
    colour = next(p for p in REGISTRY if p.kind == "color")
    assert blend_value(colour, (0.0, 1.0, 0.5), (1.0, 0.0, 0.5), 0.25) == pytest.approx(
        (0.25, 0.75, 0.5))


def test_crossfade_switches_discrete_values_at_half_way():
    a, b = two_looks()
    assert crossfade(a, b, 0.0) == a.values
    assert crossfade(a, b, 1.0) == b.values
    low, high = crossfade(a, b, 0.49), crossfade(a, b, 0.5)
    assert (low["boundary"], low["count"], low["alignment"]) == ("sphere", 1000, True)
    assert (high["boundary"], high["count"], high["alignment"]) == ("wrap", 3000, False)
    assert high["max_speed"] == pytest.approx(8.0)  # linear: the hand is the curve
    assert crossfade(a, b, 0.25)["max_speed"] == pytest.approx(6.0)
    assert crossfade(a, b, -3.0) == a.values and crossfade(a, b, 7.0) == b.values
    assert "count" not in crossfade(a, b, 0.5, keep=("count",))


def test_blend_routes_merges_the_same_source_and_parameter():
    a = [Route("low", "trail", 0.4)]
    b = [Route("low", "trail", 0.2), Route("high", "max_speed", 2.0)]
    blended = blend_routes(a, b, 0.5)
    assert [(r.source, r.param) for r in blended] == [("low", "trail"), ("high", "max_speed")]
    assert [r.amount for r in blended] == pytest.approx([0.3, 1.0])
    assert blend_routes(a, b, 0.0) == a and blend_routes(a, b, 1.0) == b


# ---- repeated routes ---------------------------------------------------------------------------

def test_a_route_repeated_exactly_is_kept_once_and_said(tmp_path, caplog):
    """Ten copies of 'low -> bloom 1.0' (what presets/6-bass-pulse.json carried): one route,
    a note naming the file and the route, said once however often the slot is recalled."""
    low_bloom = {"source": "low", "param": "bloom", "amount": 1.0}
    sine = {"source": "sine", "param": "bloom", "amount": 1.0, "beats": 4}  # another period
    path = write(tmp_path / "pulse.json", {**GOOD, "routes": [low_bloom] * 10 + [sine]})
    with caplog.at_level("INFO", logger="swarm_instrument.control.looks.presets"):
        preset = load_preset(path)
        load_preset(path)
    assert preset.routes == [Route("low", "bloom", 1.0), Route("sine", "bloom", 1.0, 4.0)]
    said = [r.getMessage() for r in caplog.records]
    assert said == [(f"preset: {path}: routes: 'low -> bloom 1' is there 10 times; kept once "
                     "(saving the look writes it once)")]
    save_preset(path, preset)  # saving the look writes it once
    assert len(json.loads(path.read_text())["routes"]) == 2


def test_a_save_never_writes_a_route_twice(tmp_path):
    """What plays is what is saved: routes on one source, parameter and period add up in
    modulation, so a look holding them twice is saved as one route of their sum."""
    routes = [Route("low", "bloom", 1.0), Route("onset", "glow", 0.5), Route("low", "bloom", 1.0)]
    preset = preset_from_show("look", Params(), routes)
    assert preset.routes == [Route("low", "bloom", 2.0), Route("onset", "glow", 0.5)]
    path = save_preset(tmp_path / "look.json", preset)
    for _ in range(3):  # recall and save again: nothing piles up
        preset = preset_from_show("look", Params(), load_preset(path).routes)
        save_preset(path, preset)
    assert load_preset(path).routes == [Route("low", "bloom", 2.0), Route("onset", "glow", 0.5)]


# ---- damaged files -----------------------------------------------------------------------------

GOOD = {"format": FORMAT, "version": 1, "name": "ok", "params": {"trail": 0.5}, "routes": []}
BAD_FILES = {
    "truncated": ('{"format": "swarm-preset", "version": 1, "params": {"trail": 0.',
                  "ends early"),
    "truncated-in-a-string": ('{"format": "swarm-preset", "name": "cal', "ends early"),
    "empty": ("", "empty"),
    "invalid": ('{"params": {"trail": 0.5,, }}', "not valid JSON at line 1"),
    "not-an-object": ("[1, 2, 3]", "a preset is a JSON object"),
    "unknown-key": ({**GOOD, "colour": 1}, "unknown key 'colour'"),
    "mapping-not-preset": ({"bindings": [], "actions": []}, "looks like a MIDI mapping"),
    "unknown-param": ({**GOOD, "params": {"trial": 0.5}},
                      "params: unknown parameter 'trial' (did you mean 'trail'?)"),
    "out-of-range": ({**GOOD, "params": {"trail": 2.0}}, "'trail' = 2.0 is out of range"),
    "wrong-type": ({**GOOD, "params": {"max_speed": "fast"}}, "'max_speed' must be a number"),
    "bad-colour": ({**GOOD, "params": {"slow_color": [1, 2]}}, "'slow_color' must be"),
    "bad-choice": ({**GOOD, "params": {"boundary": "cube"}}, "'boundary' must be one of"),
    "params-not-object": ({**GOOD, "params": [1]}, "'params' must be an object"),
    "newer-version": ({**GOOD, "version": 2}, "'version' 2 is from a newer instrument"),
    "bad-version": ({**GOOD, "version": "one"}, "'version' must be a whole number"),
    "wrong-format": ({**GOOD, "format": "swarm-mapping"}, "not a preset file"),
    "bad-name": ({**GOOD, "name": 3}, "'name' must be a non-empty string"),
    "duplicate-key": ('{"params": {"trail": 0.5, "trail": 0.6}}', "key 'trail' appears twice"),
    "route-source": ({**GOOD, "routes": [{"source": "bass", "param": "trail", "amount": 1}]},
                     "routes[0]: 'source' must be one of"),
    "route-param": ({**GOOD, "routes": [{"source": "low", "param": "boundary", "amount": 1}]},
                    "routes[0]: 'param' 'boundary' is a choice parameter"),
    "route-key": ({**GOOD, "routes": [{"source": "low", "param": "trail", "gain": 1}]},
                  "routes[0]: unknown key 'gain'"),
    "routes-not-list": ({**GOOD, "routes": {"source": "low"}}, "routes: must be a list"),
    "route-twice-other-amounts": (
        {**GOOD, "routes": [{"source": "low", "param": "bloom", "amount": 1.0},
                            {"source": "onset", "param": "glow", "amount": 1.0},
                            {"source": "low", "param": "bloom", "amount": 0.5}]},
        ("routes[0] (low -> bloom 1) and routes[2] (low -> bloom 0.5) route the same source "
         "to the same parameter; keep one")),
}


@pytest.mark.parametrize("kind", BAD_FILES)
def test_bad_file_names_file_and_key_and_changes_nothing(tmp_path, kind):
    content, expected = BAD_FILES[kind]
    path = write(tmp_path / f"{kind}.json", content)
    before = path.read_bytes()
    params = Params({"max_speed": 3.0, "trail": 0.25})
    snapshot = params.as_dict()
    with pytest.raises(PresetError) as caught:
        apply_preset(load_preset(path), params)
    message = str(caught.value)
    assert message.startswith(str(path)), message
    assert expected in message, message
    assert "Traceback" not in message and "\n" not in message
    assert isinstance(caught.value, FileProblem)  # the lead's handlers catch it
    assert params.as_dict() == snapshot
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [path.name]  # nothing written beside it


def test_truncated_file_points_at_its_backup(tmp_path):
    path = save_preset(tmp_path / "look.json", everything_changed())
    save_preset(path, everything_changed())  # now look.json.bak exists
    path.write_text(path.read_text()[:200])
    with pytest.raises(PresetError, match=r"ends early .* previous version is in .*look\.json"
                                          r"\.bak"):
        load_preset(path)


def test_missing_file_and_folder():
    with pytest.raises(PresetError, match="no such file"):
        load_preset("/nonexistent/look.json")
    with pytest.raises(PresetError, match="is a folder"):
        load_preset(ROOT)


# ---- safe writes -------------------------------------------------------------------------------

OLD, NEW = "old " * 5000 + "whole\n", "new " * 7000 + "whole\n"


class Crash(Exception):
    pass


def crash_at(step_name: str):
    def on_step(name: str) -> None:
        if name == step_name:
            raise Crash(name)
    return on_step


@pytest.mark.parametrize("step", STEPS)
def test_interrupted_save_leaves_old_or_new_whole(tmp_path, step):
    path = tmp_path / "look.json"
    atomic_write_text(path, "older\n")
    atomic_write_text(path, OLD)  # look.json = OLD, look.json.bak = "older"
    with pytest.raises(Crash):
        atomic_write_text(path, NEW, on_step=crash_at(step))
    expect_new = STEPS.index(step) > STEPS.index("replace")
    assert path.read_text() == (NEW if expect_new else OLD)
    backup = backup_path(path).read_text()
    assert backup == (OLD if STEPS.index(step) > STEPS.index("backup") else "older\n")
    assert sorted(os.listdir(tmp_path)) == ["look.json", "look.json.bak"]  # no leftovers


@pytest.mark.parametrize("step", STEPS)
def test_first_save_interrupted_leaves_no_file_or_the_whole_file(tmp_path, step):
    path = tmp_path / "look.json"
    if step == "backup":  # no old file: no backup step, the write goes through
        atomic_write_text(path, NEW, on_step=crash_at(step))
    else:
        with pytest.raises(Crash):
            atomic_write_text(path, NEW, on_step=crash_at(step))
    if STEPS.index(step) > STEPS.index("replace") or step == "backup":
        assert path.read_text() == NEW
    else:
        assert not path.exists()
    assert sorted(os.listdir(tmp_path)) == (["look.json"] if path.exists() else [])


CHILD = """
import os, sys
sys.path.insert(0, sys.argv[1])
from swarm_instrument.control.looks.atomic import atomic_write_text
def die(name):
    if name == sys.argv[3]:
        os._exit(17)  # no finally, no cleanup: as a power cut would leave it
atomic_write_text(sys.argv[2], "new " * 7000 + "whole\\n", on_step=die)
"""


def test_hard_crash_at_every_step_leaves_old_or_new_whole(tmp_path):
    """A child process dies (os._exit) before each step; PATH and .bak stay whole."""
    for step in STEPS:
        folder = tmp_path / step
        folder.mkdir()
        path = folder / "look.json"
        atomic_write_text(path, "older\n")
        atomic_write_text(path, OLD)
        result = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(path), step],
                                check=False, capture_output=True, text=True, timeout=60)
        assert result.returncode == 17, result.stderr
        assert path.read_text() in (OLD, NEW), step
        assert backup_path(path).read_text() in ("older\n", OLD), step
        leftovers = [n for n in os.listdir(folder) if n not in ("look.json", "look.json.bak")]
        assert all(n.startswith(".") and n.endswith(".tmp") for n in leftovers), leftovers
        with pytest.raises(PresetError):  # a leftover temporary file is never a preset
            PresetBank(folder, folder).resolve("tmp")


def test_backup_keeps_the_previous_version_and_can_be_off(tmp_path):
    path = tmp_path / "look.json"
    atomic_write_text(path, "one")
    assert not backup_path(path).exists()
    atomic_write_text(path, "two")
    atomic_write_text(path, "three")
    assert (path.read_text(), backup_path(path).read_text()) == ("three", "two")
    atomic_write_text(path, "four", backup=False)
    assert (path.read_text(), backup_path(path).read_text()) == ("four", "two")


def test_save_keeps_the_file_mode(tmp_path):
    path = tmp_path / "look.json"
    atomic_write_text(path, "one")
    os.chmod(path, 0o640)
    atomic_write_text(path, "two")
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_unwritable_place_is_a_clear_error_and_touches_nothing(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(FileProblem, match="not-a-folder/look.json: cannot write it"):
        atomic_write_text(blocker / "look.json", "x")
    with pytest.raises(PresetError, match="cannot write it"):
        save_preset(blocker / "look.json", everything_changed())
    assert blocker.read_text() == "a file where a folder should be"


def test_symlinked_file_is_refused_not_written_through(tmp_path):
    real = tmp_path / "real.json"
    atomic_write_text(real, "one")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(FileProblem, match="link.json is a symbolic link; refusing"):
        atomic_write_text(link, "two")
    assert link.is_symlink() and real.read_text() == "one"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


# ---- slots and names ---------------------------------------------------------------------------

def bundled_hashes() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in BUNDLED_DIR.iterdir() if path.is_file()}


def test_bundled_presets_fill_slots_in_file_name_order(tmp_path):
    bank = PresetBank(tmp_path / "user")
    names = bank.names()
    assert len(BUNDLED) >= 6
    assert list(names) == list(range(1, len(BUNDLED) + 1))
    for slot, path in enumerate(BUNDLED, start=1):
        assert path.name.startswith(f"{slot}-")
        assert bank.recall(slot).name == names[slot] == path.stem.split("-", 1)[1]


def test_save_goes_to_the_user_folder_and_overrides_the_slot(tmp_path):
    before = bundled_hashes()
    bank = PresetBank(tmp_path / "user" / "presets")  # created on first save
    mine = preset_from_show("mine", Params({"trail": 0.8}), [])
    path = bank.save(1, mine)
    assert path == tmp_path / "user" / "presets" / "slot-1.json"
    assert bank.recall(1).values == mine.values and bank.names()[1] == "mine"
    bank.save(1, preset_from_show("mine again", Params(), []))
    assert backup_path(path).exists()
    assert bundled_hashes() == before  # a bundled file is never written
    assert PresetBank(tmp_path / "elsewhere").recall(1).name != "mine again"


def test_empty_and_impossible_slots(tmp_path):
    bank = PresetBank(tmp_path / "user", bundled_folder=tmp_path / "none")
    with pytest.raises(PresetError, match="slot 9 is empty; Ctrl\\+9 saves"):
        bank.recall(9)
    for slot in (0, 10, True):
        with pytest.raises(PresetError, match="slots are 1 to 9"):
            bank.recall(slot)
    assert bank.names() == {}


def test_user_folder_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SWARM_PRESETS_DIR", str(tmp_path / "env"))
    assert PresetBank().user_folder == tmp_path / "env"


def test_resolve_by_path_name_file_name_and_slot(tmp_path):
    bank = PresetBank(tmp_path / "user")
    first = BUNDLED[0]
    name = load_preset(first).name
    assert bank.resolve(str(first)) == first
    assert bank.resolve(name.upper()) == first
    assert bank.resolve("1") == first
    assert bank.resolve("missing.json") == Path("missing.json")  # a path: load says why
    assert bank.resolve(first.name) == first  # a bundled file by its file name
    bank.save(2, preset_from_show("My Look", Params(), []))
    assert bank.resolve("my look") == tmp_path / "user" / "slot-2.json"
    assert bank.resolve("2") == tmp_path / "user" / "slot-2.json"
    with pytest.raises(PresetError) as caught:
        bank.resolve(name[:-1] + "x")
    message = str(caught.value)
    assert f"did you mean '{name}'" in message and "known: " in message
    assert "midi" not in message.split("known: ")[1].split(" (in")[0]  # mappings are not presets


# ---- recovery ----------------------------------------------------------------------------------

def test_recovery_writes_every_interval_and_only_when_changed(tmp_path):
    path = tmp_path / "state" / "recovery.json"
    writer = RecoveryWriter(path, interval=3.0)
    params = Params({"trail": 0.4})
    assert writer.maybe_save(100.0, params, [], {"preset": "calm-school", "seed": 7}) is None
    assert writer.flush() and writer.writes == 1
    params["trail"] = 0.5
    for now in (101.0, 102.9):
        writer.maybe_save(now, params, [], {"preset": "calm-school", "seed": 7})
    assert writer.flush() and writer.writes == 1 and load_recovery(path).values["trail"] == 0.4
    writer.maybe_save(103.0, params, [], {"preset": "calm-school", "seed": 7})
    assert writer.flush() and writer.writes == 2
    writer.maybe_save(106.0, params, [], {"preset": "calm-school", "seed": 7})
    assert writer.flush() and writer.writes == 2  # nothing changed: nothing written
    resumed = load_recovery(path)
    assert resumed.values == params.as_dict()
    assert resumed.name == "calm-school" and resumed.state == {"preset": "calm-school", "seed": 7}
    writer.close()


def test_recovery_is_written_off_the_frame(tmp_path, monkeypatch):
    """The frame hands the text over and goes on while the write (fsync and all) runs."""
    import threading

    import swarm_instrument.control.looks.recovery as presets

    release, writing = threading.Event(), threading.Event()
    real_write = presets.atomic_write_text

    def slow_write(*args, **kwargs):
        writing.set()
        release.wait(10)  # a disk that takes its time
        real_write(*args, **kwargs)

    monkeypatch.setattr(presets, "atomic_write_text", slow_write)
    path = tmp_path / "recovery.json"
    writer = RecoveryWriter(path, interval=0.0)
    writer.maybe_save(0.0, Params({"trail": 0.1}), [])  # returns at once
    assert writing.wait(5) and not path.exists()
    for k in range(5):  # frames go on; only the latest state waits to be written
        writer.maybe_save(1.0 + k, Params({"trail": 0.2 + k / 10}), [])
    release.set()
    writer.close()
    assert writer.writes == 2 and load_recovery(path).values["trail"] == pytest.approx(0.6)


def test_recovery_keeps_the_last_session_once(tmp_path):
    path = tmp_path / "recovery.json"
    RecoveryWriter(path).save(Params({"trail": 0.1}), [])
    second = RecoveryWriter(path)
    second.save(Params({"trail": 0.2}), [])
    second.save(Params({"trail": 0.3}), [])
    assert load_preset(backup_path(path)).values["trail"] == 0.1  # the crashed session
    assert load_recovery(path).values["trail"] == 0.3


def test_recovery_never_raises_and_reports_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    writer = RecoveryWriter(blocker / "recovery.json", interval=1.0)
    writer.maybe_save(0.0, Params(), [])
    writer.flush()
    first = writer.maybe_save(1.0, Params(), [])  # the failure, said by the next frame
    assert first and str(blocker) in first and writer.error == first
    writer.flush()
    assert writer.maybe_save(2.0, Params(), []) is None  # said once
    assert writer.error == first
    assert writer.save(Params(), [], {"bad": object()}) is not None  # not JSON: still no raise
    writer.close()


def test_resume_without_a_recovery_file_says_so(tmp_path):
    with pytest.raises(PresetError, match="no recovery file, so nothing to resume"):
        load_recovery(tmp_path / "recovery.json")


# ---- the bundled files -------------------------------------------------------------------------

@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_preset_loads_and_is_saved_canonically(path):
    preset = load_preset(path)
    assert preset.about, "say what the look is"
    data = json.loads(path.read_text())
    expected = preset_to_json(preset)  # as save_preset writes it, less parameters added since
    expected["params"] = {k: v for k, v in expected["params"].items() if k in data["params"]}
    assert data == expected
    assert preset.name == path.stem.split("-", 1)[1]
    apply_preset(preset, Params())


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_preset_routes_each_source_to_a_parameter_once(path):
    """Clean as shipped: no route twice (6-bass-pulse.json once carried one ten times)."""
    routes = json.loads(path.read_text())["routes"]
    keys = [(r["source"], r["param"], r.get("beats", 1.0)) for r in routes]
    assert len(keys) == len(set(keys)), f"{path.name}: a route is there twice"
    assert load_preset(path).notes == []


def test_bundled_presets_are_distinct_looks():
    looks = [load_preset(path) for path in BUNDLED]
    for i, a in enumerate(looks):
        for b in looks[i + 1:]:
            assert len(set(differences(a, Params(b.values), b.routes))) >= 3, (a.name, b.name)
    assert any(p.values["boundary"] == "wrap" and p.values["dimensions"] == 2 for p in looks)
    assert any(p.values["trail"] >= 0.9 for p in looks)
    assert any(route.source == "low" for p in looks for route in p.routes)


@pytest.mark.parametrize("path", MAPPINGS, ids=lambda p: p.name)
def test_bundled_midi_mappings_load(path):
    from swarm_instrument.control.midi.mapping_file import load_mapping

    assert load_mapping(path) is not None
