"""OSC input: the strict parser, what each address means, the UDP socket with a real sender
(python-osc's client, an independent implementation), the show applying it, and --osc."""

import json
import math
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.udp_client import SimpleUDPClient

from swarm_instrument.control.actions import Action
from swarm_instrument.control.looks.preset_bank import PresetBank
from swarm_instrument.control.midi.mapping import Binding
from swarm_instrument.control.osc.osc_input import (
    MAX_DATAGRAMS_PER_FRAME,
    MAX_MESSAGES_PER_FRAME,
    OscInput,
    OscProblem,
    interpret,
    parse_endpoint,
)
from swarm_instrument.control.osc.osc_wire import (
    MAX_ARGUMENTS,
    Budget,
    OscError,
    TimeTag,
    parse_message,
    parse_packet,
    printable,
)
from swarm_instrument.control.parameters.registry import Params, param
from swarm_instrument.show.cli.options import ShowOptions
from swarm_instrument.show.report import osc_line
from swarm_instrument.show.show import Show

from conftest import ROOT, run_instrument

# The two examples of the OSC 1.0 specification, byte for byte.
SPEC_FREQUENCY = bytes.fromhex("2f6f7363696c6c61746f722f342f6672657175656e6379002c66000043dc0000")
SPEC_FOO = (b"/foo\0\0\0\0,iisff\0\0" + struct.pack(">ii", 1000, -1) + b"hello\0\0\0"
            + struct.pack(">ff", 1.234, 5.678))


def osc_string(raw):
    """An OSC-string by hand (python-osc will not build a malformed one): a zero, padding."""
    return raw + b"\0" * (4 - len(raw) % 4)


def message(address, *args):
    builder = OscMessageBuilder(address)
    for arg in args:
        builder.add_arg(*arg) if isinstance(arg, tuple) else builder.add_arg(arg)
    return builder.build().dgram


def test_the_specification_examples_parse():
    assert parse_message(SPEC_FREQUENCY) == ("/oscillator/4/frequency", [440.0])
    address, args = parse_message(SPEC_FOO)
    assert address == "/foo" and args[:3] == [1000, -1, "hello"]
    assert args[3:] == pytest.approx([1.234, 5.678])


def test_every_argument_type_and_nested_bundles():
    assert parse_message(message("/a", True, False, None, 2**40, 0.5, (0.1, "d"),
                                 b"\x01\x02\x03", "text")) == \
        ("/a", [True, False, None, 2**40, 0.5, 0.1, b"\x01\x02\x03", "text"])
    assert parse_message(b"/bare\0\0\0") == ("/bare", [])  # old senders omit the type tags
    inner = OscBundleBuilder(IMMEDIATELY)
    inner.add_content(OscMessageBuilder("/swarm/respawn").build())
    outer = OscBundleBuilder(IMMEDIATELY)
    outer.add_content(OscMessageBuilder("/swarm/burst").build())
    outer.add_content(inner.build())
    packet = parse_packet(outer.build().dgram)
    assert packet.messages == [("/swarm/burst", []), ("/swarm/respawn", [])]
    assert packet.dropped == 0


@pytest.mark.parametrize("data, reason", [
    (SPEC_FREQUENCY[:-4], "runs past the end"),
    (SPEC_FREQUENCY[:-1], "not a multiple of 4"),
    (b"/abc", "no terminating zero"),
    (b"abc\0", "does not start with '/'"),
    (b"/a\0\0,q\0\0", "unknown type tag 'q'"),
    (b"/a\0\0,i\0\0\0\0\0\0\0\0\0\0", "bytes after the last argument"),
    (b"/a\0\0,b\0\0\xff\xff\xff\xff", "negative size"),
    (b"/a\0\0,b\0\0\x7f\xff\xff\xff", "runs past the end"),
    (b"/\xe9t\xe9\0\0\0\0", "not ASCII"),
    (b"#bundle\0" + bytes(8) + struct.pack(">i", 1 << 30), "runs past the end"),
    (b"#bundle\0" + bytes(8) + struct.pack(">i", -4), "size -4"),
    # Strict OSC 1.0 (issue 13): each of these was accepted before.
    (b"/a\0\x01,i\0\0" + struct.pack(">i", 1), "address at byte 0: padding bytes are not zero"),
    (b"/a\0\0,i\0\x01" + struct.pack(">i", 1), "type tags at byte 4: padding bytes are not zero"),
    (b"/a\0\0,s\0\0ab\0\x01", r"argument 1 \('s'\) at byte 8: padding bytes are not zero"),
    (b"/a\0\0,b\0\0" + struct.pack(">i", 1) + b"\x01\x02\0\0", "padding bytes after the blob"),
    (b"#bundle\0" + bytes(8) + struct.pack(">i", 8) + b"/a\0\x07,\0\0\0", "padding bytes"),
    (message("/swarm/max_speed/", 1.0), "ends with '/'"),
    (message("/swarm//max_speed", 1.0), r"has an empty part \('//'\)"),
    (message("/swarm/max speed", 1.0), "printable ASCII"),
    (message("/swarm/max\x7fspeed", 1.0), "printable ASCII"),
    (message("/swarm/max_speed", *[1.0] * 17), r"type tags for 17 arguments \(at most 16\)"),
    (b"/a\0\0," + b"f" * 60000 + b"\0" * 3, "type tags for 60000 arguments"),
    (b"#bundle\0" + bytes(8) + struct.pack(">i", 6) + bytes(8), "size 6"),
    (b"#bundle\0" + bytes(8) + struct.pack(">i", 0), "size 0"),
    (b"#bundle\0" + bytes(4), "no time tag"),
])
def test_malformed_datagrams_say_why(data, reason):
    with pytest.raises(OscError, match=reason):
        parse_packet(data)


def test_a_bundle_bomb_is_refused():
    packet = message("/swarm/respawn")
    for _ in range(20):
        packet = b"#bundle\0" + bytes(8) + struct.pack(">i", len(packet)) + packet
    with pytest.raises(OscError, match="nested more than 8 deep"):
        parse_packet(packet)


def test_the_limits_themselves_are_accepted():
    """Exactly MAX_ARGUMENTS arguments and exactly 8 nested bundles are fine; one more is not."""
    assert MAX_ARGUMENTS == 16
    assert parse_message(message("/a", *range(16))) == ("/a", list(range(16)))
    packet = message("/swarm/respawn")
    for depth in range(1, 10):
        packet = b"#bundle\0" + bytes(8) + struct.pack(">i", len(packet)) + packet
        if depth <= 8:
            assert parse_packet(packet).messages == [("/swarm/respawn", [])]
    with pytest.raises(OscError, match="nested more than 8 deep"):
        parse_packet(packet)


def test_huge_type_tags_are_refused_before_any_argument_is_read():
    """The probe's 59 ms frame: 12,000 float arguments, every one present, were all decoded
    before the address said it takes one. Now the tags are counted first."""
    count = 12000
    tags = b"," + b"f" * count + b"\0" * (4 - (count + 1) % 4)
    data = b"/swarm/max_speed\0\0\0\0" + tags + struct.pack(f">{count}f", *[1.0] * count)
    assert len(data) < 65507  # one UDP datagram
    best = math.inf
    for _ in range(3):  # CPU time, the fastest of three: the parser's work alone
        start = time.thread_time()
        with pytest.raises(OscError, match=f"type tags for {count} arguments"):
            parse_packet(data)
        best = min(best, time.thread_time() - start)
    assert best < 0.002, f"{best * 1e3:.2f} ms of CPU to refuse {count} type tags"


def test_a_time_tag_argument_is_not_a_number():
    data = b"/swarm/max_speed\0\0\0\0,t\0\0" + struct.pack(">Q", 12)
    address, args = parse_message(data)
    assert args == [TimeTag(12)]
    with pytest.raises(OscError, match=r"argument 1 is a time tag \('t'\), not a value"):
        interpret(address, args)
    # Bundle time tags stay accepted, and ignored: the message applies on the next frame.
    bundle = OscBundleBuilder(time.time() + 3600)  # an hour from now: applied at once anyway
    bundle.add_content(OscMessageBuilder("/swarm/respawn").build())
    assert parse_packet(bundle.build().dgram).messages == [("/swarm/respawn", [])]


@pytest.mark.parametrize("address, args, reason", [
    ("/swarm/max_speed", [b"\x01" * 5000], r"argument 1 is a blob \('b'\) of 5000 bytes"),
    ("/swarm/boundary", ["w" * 70000], "string of 70000 characters; no value is longer than 64"),
    ("/swarm/slow_color", [0.1, 0.2, TimeTag(1)], "argument 3 is a time tag"),
    ("/swarm/*_speed", [1.0], "address patterns .* are not supported"),
])
def test_arguments_that_are_no_value_say_which(address, args, reason):
    with pytest.raises(OscError, match=reason) as refused:
        interpret(address, args)
    assert len(str(refused.value)) <= 200


def test_printable_escapes_and_cuts_what_it_quotes():
    assert printable("/swarm/max_speed") == "/swarm/max_speed"
    assert printable("\x1b]0;TITLE\x07\x1b[2J") == "\\x1b]0;TITLE\\x07\\x1b[2J"
    assert printable("a\\b\n\t") == "a\\\\b\\n\\t"  # a backslash doubled: escapes unambiguous
    assert printable(b"/\xe9\x00\x9b") == "/\\xe9\\x00\\x9b"  # bytes, C1 CSI included
    assert printable("\u202e\U0001f600") == "\\u202e\\U0001f600"  # bidi override, emoji
    assert printable("x" * 100) == "x" * 57 + "..."
    assert printable("a" * 55 + "\x1b" * 3) == "a" * 55 + "..."  # never half an escape
    assert printable("x" * 10, limit=10) == "x" * 10
    for text in ("\x1b" * 1000, "\x07" * 61, bytes(range(256)) * 4):
        quoted = printable(text)
        assert len(quoted) <= 60 and quoted.endswith("...")
        assert quoted.isascii() and quoted.isprintable()
    huge, best = "\x1b" * 10_000_000, math.inf
    for _ in range(3):  # CPU time, the fastest of three: printable's work alone
        start = time.thread_time()
        printable(huge)
        best = min(best, time.thread_time() - start)
    assert best < 0.001  # O(limit), not O(len): escaping 10 M characters would take seconds


ESCAPE = "\x1b]0;TITLE\x07\x1b[2J"  # retitles a terminal, then clears it


def assert_safe(reason):
    assert reason.isascii() and reason.isprintable(), repr(reason)
    assert "\x1b" not in reason and "\x07" not in reason and len(reason) <= 200


def test_outside_text_never_reaches_the_terminal_raw(osc):
    """Addresses and strings in refusal reasons are quoted escaped (issue 13: an OSC address
    retitled and cleared the performer's terminal through the console)."""
    for address, args in [("/" + ESCAPE, [1.0]), ("/swarm/" + ESCAPE, []),
                          ("/swarm/max_speed", [ESCAPE]), ("/swarm/boundary", [ESCAPE]),
                          ("/swarm/burst", [ESCAPE, ESCAPE])]:
        with pytest.raises(OscError) as refused:
            interpret(address, args)
        assert_safe(str(refused.value))
        assert "\\x1b]0;TITLE\\x07" in str(refused.value)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = [osc_string(b"/" + ESCAPE.encode()), message("/swarm/boundary", ESCAPE),
            osc_string(b"/" + ESCAPE.encode() * 3000),  # a 51 KB address, quoted 60 characters
            osc_string(b"/\x1b\xff") + osc_string(b",s") + osc_string(b"\x1b[2J"),
            osc_string(ESCAPE.encode())]
    reasons = []
    try:
        for data in sent:
            sender.sendto(data, ("127.0.0.1", osc.port))
            before = osc.received
            wait_for(osc, before + 1)
            reasons.append(osc.last_error)
    finally:
        sender.close()
    assert osc.rejected == len(sent) and osc.applied == 0
    for reason in reasons:
        assert_safe(reason)
    assert "\\x1b]0;TITLE\\x07" in reasons[0] and "printable ASCII" in reasons[0]
    assert "'boundary' must be one of" in reasons[1]
    assert "\\x1b" in reasons[3] and "not ASCII" in reasons[3]


def test_a_64k_bundle_applies_the_frame_budget_and_refuses_the_rest(osc):
    """The probe's 1.09 s frame: one 64 KB bundle of 2,7xx messages, all decoded and applied
    in one frame. Now a frame decodes at most 256; the rest are refused, counted as dropped,
    said why, and never applied late."""
    assert MAX_MESSAGES_PER_FRAME == 256
    count = (65507 - 16) // 24  # as many 20-byte messages as one UDP datagram holds: 2,728
    bundle = OscBundleBuilder(IMMEDIATELY)
    for _ in range(count):
        bundle.add_content(OscMessageBuilder("/swarm/respawn").build())
    data = bundle.build().dgram
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sender.sendto(data, ("127.0.0.1", osc.port))
        commands, worst = timed_polls(osc, 1)
    finally:
        sender.close()
    assert worst < 0.050, f"poll worked {worst * 1e3:.1f} ms of CPU"
    assert len(commands) == 256 and commands[0] == Action("respawn")
    assert osc.applied == 256 and osc.dropped == count - 256 == 2472
    assert osc.rejected == 2472  # dropped messages are refused messages too
    assert "2472 message(s) past this frame's 256 refused" in osc.last_error
    assert osc.poll() == [] and osc.applied == 256  # nothing of the bundle comes later
    assert osc.state()["dropped"] == 2472


def test_the_issue_bundle_of_2729_messages_decodes_256():
    bundle = OscBundleBuilder(IMMEDIATELY)
    for _ in range(2729):
        bundle.add_content(OscMessageBuilder("/swarm/burst").build())
    packet = parse_packet(bundle.build().dgram)
    assert len(packet.messages) == 256 and packet.dropped == 2729 - 256


def test_bundles_share_the_frame_budget_and_the_rest_waits(osc):
    first, second = (OscBundleBuilder(IMMEDIATELY) for _ in range(2))
    for k in range(100):
        first.add_content(message_object("/swarm/trail", k / 100))
    for _ in range(200):
        second.add_content(message_object("/swarm/burst", 0.5))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for data in (first.build().dgram, second.build().dgram, message("/swarm/respawn")):
            sender.sendto(data, ("127.0.0.1", osc.port))
        time.sleep(0.05)  # all three in the socket before the frame reads it
        frame = osc.poll()
    finally:
        sender.close()
    assert len(frame) == 256 and frame[99].values == {"trail": 0.99}
    assert frame[100:] == [Action("separation_burst", 0.5)] * 156
    assert osc.dropped == 44 and osc.received == 2  # the third datagram waits in the socket
    assert osc.poll() == [Action("respawn")]  # and comes next frame; the 44 never do


def test_a_bundle_inside_a_bundle_costs_one_of_the_budget():
    """A datagram of empty bundles decodes nothing yet is work: each nested bundle counts."""
    empty = struct.pack(">i", 16) + b"#bundle\0" + bytes(8)
    tail = message("/swarm/respawn")
    data = b"#bundle\0" + bytes(8) + empty * 300 + struct.pack(">i", len(tail)) + tail
    packet = parse_packet(data)
    assert packet.messages == [] and packet.dropped == 1
    budget = Budget(left=301)
    assert parse_packet(data, budget).messages == [("/swarm/respawn", [])] and budget.left == 0
    # Past the budget the structure is still checked: a broken element refuses the datagram.
    broken = b"#bundle\0" + bytes(8) + empty * 300 + struct.pack(">i", 6) + bytes(8)
    with pytest.raises(OscError, match="size 6"):
        parse_packet(broken)


def test_random_and_mutated_bytes_only_ever_give_osc_errors():
    rng = np.random.default_rng(3)
    seeds = [SPEC_FREQUENCY, SPEC_FOO, message("/swarm/slow_color", 0.1, 0.2, 0.3)]
    for k in range(20000):
        data = bytearray(seeds[k % 3])
        for _ in range(rng.integers(1, 5)):
            data[rng.integers(len(data))] = rng.integers(256)
        if k % 4 == 0:
            data = data[:rng.integers(len(data) + 1)]
        if k % 7 == 0:
            data = bytearray(rng.bytes(int(rng.integers(0, 80))))
        try:
            for address, args in parse_packet(bytes(data)).messages:
                try:
                    interpret(address, args)
                except OscError:
                    pass
        except OscError:
            pass


def test_addresses_mean_what_the_readme_says():
    assert interpret("/swarm/max_speed", [12]) == Action("set", values={"max_speed": 12.0})
    # /norm spans the performance range on the parameter's curve: max_speed 1..40, geometric
    assert interpret("/swarm/max_speed/norm", [0.5]).values["max_speed"] == pytest.approx(
        40 ** 0.5)
    assert interpret("/swarm/separation", [False]).values == {"separation": False}
    assert interpret("/swarm/separation", [1]).values == {"separation": True}
    assert interpret("/swarm/boundary", ["wrap"]).values == {"boundary": "wrap"}
    assert interpret("/swarm/dimensions", [2]).values == {"dimensions": 2}
    assert interpret("/swarm/count", [5000.0]).values == {"count": 5000}
    assert interpret("/swarm/slow_color", [0.0, 0.5, 1.0]).values["slow_color"] == (0, 0.5, 1)
    assert interpret("/swarm/slow_color", ["#ff0000"]).values["slow_color"] == (1.0, 0, 0)
    assert interpret("/swarm/preset", [3]) == Action("recall_preset", 3)
    assert interpret("/swarm/respawn", []) == Action("respawn")
    assert interpret("/swarm/burst", []) == Action("separation_burst", 1.0)
    assert interpret("/swarm/burst", [0.25]) == Action("separation_burst", 0.25)


def test_norm_spans_the_performance_range_as_a_knob_does():
    spec = param("neighbor_radius")
    low = interpret("/swarm/neighbor_radius/norm", [0.0]).values["neighbor_radius"]
    high = interpret("/swarm/neighbor_radius/norm", [1.0]).values["neighbor_radius"]
    assert (low, high) == spec.play_range == (0.5, 12.0)
    assert spec.lo < low and high < spec.hi  # inside the hard limits
    for x in (0.0, 0.3, 0.5, 1.0):  # the same value a MIDI knob at that position gives
        knob = Binding(1, 74, "neighbor_radius").value(x)
        assert interpret("/swarm/neighbor_radius/norm", [x]).values["neighbor_radius"] == knob
    count = interpret("/swarm/count/norm", [0.5]).values["count"]
    assert isinstance(count, int)
    # a switch or a choice on a fader: the upper half is on, each choice an equal part
    assert interpret("/swarm/separation/norm", [0.7]).values == {"separation": True}
    assert interpret("/swarm/boundary/norm", [0.2]).values == {"boundary": "sphere"}
    assert interpret("/swarm/boundary/norm", [0.9]).values == {"boundary": "wrap"}


@pytest.mark.parametrize("address, args, reason", [
    ("/swarm/max_speed", [1e9], r"'max_speed' = 1000000000.0 is out of range \[0"),
    ("/swarm/max_speed", [math.nan], "finite"),
    ("/swarm/max_speed", ["fast"], "needs a number"),
    ("/swarm/max_speed", [], "needs one argument"),
    ("/swarm/max_speed", [1.0, 2.0], "needs one argument"),
    ("/swarm/max_speed/norm", [1.5], "takes 0..1"),
    ("/swarm/slow_color/norm", [0.5], "/norm takes one number"),
    ("/swarm/boundary", ["cube"], "must be one of"),
    ("/swarm/count", [2.5], "whole number"),
    ("/swarm/slow_color", [0.1, 0.2], "three numbers"),
    ("/swarm/slow_color", [0.1, 0.2, 7.0], "within 0..1"),
    ("/swarm/no_such_knob", [1.0], "unknown address"),
    ("/swarm/max_speed/extra", [1.0], "unknown address"),
    ("/other/thing", [1.0], "ours start with /swarm/"),
    ("/swarm/preset", [0], "slots are 1-9"),
    ("/swarm/preset", [2.5], "slots are 1-9"),
    ("/swarm/burst", [3.0], "0..1"),
])
def test_bad_messages_are_refused_with_the_reason(address, args, reason):
    with pytest.raises(OscError, match=reason):
        interpret(address, args)


def test_endpoints():
    assert parse_endpoint("9000") == ("0.0.0.0", 9000)
    assert parse_endpoint("127.0.0.1:7000") == ("127.0.0.1", 7000)
    for bad in ("x", "70000", "0", "host:"):
        with pytest.raises(ValueError, match="--osc"):
            parse_endpoint(bad)


@pytest.fixture
def osc():
    osc = OscInput("127.0.0.1", 0)
    yield osc
    osc.close()


def test_a_port_in_use_is_a_clear_problem(osc):
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(("127.0.0.1", 0))
    try:
        with pytest.raises(OscProblem, match=rf"127.0.0.1:{holder.getsockname()[1]}.*--osc PORT"):
            OscInput("127.0.0.1", holder.getsockname()[1])
    finally:
        holder.close()


def message_object(address, *args):
    builder = OscMessageBuilder(address)
    for arg in args:
        builder.add_arg(arg)
    return builder.build()


def timed_polls(osc, count, timeout=2.0):
    """Poll until `count` datagrams were read: (the commands, the most CPU time a poll took,
    in seconds: its work, not the scheduler's other business)."""
    got, worst, deadline = [], 0.0, time.monotonic() + timeout
    while osc.received < count and time.monotonic() < deadline:
        start = time.thread_time()
        got += osc.poll()
        worst = max(worst, time.thread_time() - start)
        time.sleep(0.002)
    return got, worst


def wait_for(osc, count, timeout=2.0):
    """Commands from `count` datagrams already sent (UDP on localhost is quick, not instant)."""
    got, deadline = [], time.monotonic() + timeout
    while osc.received < count and time.monotonic() < deadline:
        got += osc.poll()
        time.sleep(0.005)
    return got + osc.poll()


def test_the_show_follows_a_real_sender_and_shrugs_off_garbage(ctx, osc, tmp_path, said):
    bank = PresetBank(tmp_path / "user")
    show = Show(ctx, Params({"count": 500, "morph_seconds": 0.0}), ShowOptions(),
                presets=bank, osc=osc)
    client = SimpleUDPClient("127.0.0.1", osc.port)
    raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        client.send_message("/swarm/max_speed", 13.5)
        client.send_message("/swarm/cohesion_weight/norm", 0.0)
        client.send_message("/swarm/fast_color", [1.0, 0.0, 0.5])
        for junk in (b"\xff" * 13, b"/swarm/max_speed\0\0\0\0,f\0\0", b"",
                     message("/swarm/max_speed", 1e9), message("/swarm/nothing", 1.0),
                     message("/swarm/" + ESCAPE, 1.0)):
            raw.sendto(junk, ("127.0.0.1", osc.port))
        for action in wait_for(osc, 9):
            show.act(action)
        show.update(0.5)  # nothing more to read; the show says the refusals, once
        assert show.params["max_speed"] == 13.5 and show.params["cohesion_weight"] == 0.0
        assert show.params["fast_color"] == (1.0, 0.0, 0.5)
        assert osc.applied == 3 and osc.rejected == 6
        refused = [line for line in said if line.startswith("osc:")]
        assert len(refused) == 1 and "6 message(s) refused" in refused[0]
        assert "3 applied  6 refused" in osc_line(show.osc)
        # The console and the HUD quote the address escaped: the terminal is not retitled.
        assert "/swarm/\\x1b]0;TITLE\\x07" in refused[0]
        for text in (*said, osc_line(show.osc)):
            assert "\x1b" not in text and "\x07" not in text
        # Actions: a respawn, and a preset recalled by slot (1-9), as the number keys do.
        show.advance(1 / 60)
        client.send_message("/swarm/respawn", [])
        client.send_message("/swarm/preset", 2)
        for action in wait_for(osc, 10):
            show.act(action)
        assert show.respawns == 1 and show.looks.preset.name == bank.recall(2).name
        telemetry = show.telemetry()["osc"]
        assert telemetry["applied"] == 5 and telemetry["rejected"] == 6
    finally:
        raw.close()
        show.release()


def test_a_flood_costs_bounded_work_per_frame(osc):
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    datagram = message("/swarm/max_speed", 9.0)
    try:
        for _ in range(MAX_DATAGRAMS_PER_FRAME + 20):
            sender.sendto(datagram, ("127.0.0.1", osc.port))
        assert len(osc.poll()) == MAX_DATAGRAMS_PER_FRAME  # the rest waits in the socket
        assert len(osc.poll()) == 20
        assert osc.poll() == []
    finally:
        sender.close()


@pytest.mark.slow  # the command, played
def test_command_line_osc(tmp_path):
    result = run_instrument("--headless", "--frames", "2", "--osc", "99999")
    assert result.returncode == 2 and "--osc" in result.stderr and "1 to 65535" in result.stderr
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    try:
        result = run_instrument("--headless", "--frames", "3", "--count", "300", "--no-midi",
                                "--osc", f"127.0.0.1:{port}")
    finally:
        holder.close()
    assert result.returncode == 0, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stdout
    assert "the show goes on without OSC" in result.stdout
    # Free again: a show listens there, and a sender turns its speed up while it plays.
    telemetry = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "instrument.py"), "--headless", "--frames", "150",
         "--count", "300", "--no-midi", "--osc", f"127.0.0.1:{port}", "--telemetry",
         str(telemetry)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = SimpleUDPClient("127.0.0.1", port)
    try:
        while process.poll() is None:
            client.send_message("/swarm/max_speed", 21.0)
            time.sleep(0.05)
    finally:
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"osc: listening on 127.0.0.1:{port}" in out
    last = json.loads(telemetry.read_text().splitlines()[-1])
    assert last["params"]["max_speed"] == 21.0 and last["osc"]["applied"] > 0


def test_osc_actions_are_recorded_like_the_pads(ctx, osc, tmp_path):
    """--record-control keeps what OSC did, so the set renders again with it."""
    from swarm_instrument.control.tracks.track_recorder import ControlRecorder

    params = Params({"count": 300})
    show = Show(ctx, params, ShowOptions(), osc=osc)
    path = tmp_path / "set.jsonl"
    show.recorder = ControlRecorder(path, params=params)
    client = SimpleUDPClient("127.0.0.1", osc.port)
    try:
        client.send_message("/swarm/respawn", [])
        client.send_message("/swarm/burst", 0.5)
        client.send_message("/swarm/trail", 0.7)
        show.update(1.0)
        for _ in range(50):
            if osc.applied == 3:
                break
            time.sleep(0.02)
            show.update(1.0)
    finally:
        show.recorder.close()
        show.release()
    events = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    actions = [(e["action"], e["value"]) for e in events if e["kind"] == "action"]
    assert actions == [("respawn", None), ("separation_burst", 0.5)]  # the strength sent
    assert {"kind": "param", "name": "trail", "value": 0.7} in [
        {k: e[k] for k in ("kind", "name", "value") if k in e} for e in events]
    assert show.respawns == 1


def test_render_refuses_osc(tmp_path):
    result = run_instrument("--render", str(tmp_path / "song.wav"), "--osc", "9000")
    assert result.returncode == 2 and "--osc plays a live show" in result.stderr
