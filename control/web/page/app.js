// The swarm instrument's web remote: builds its controls from the show's "hello" (every
// parameter of the registry, grouped, with its performance range and curve), sends OSC's
// addresses as JSON arrays over the WebSocket, and shows the state the show pushes a few times
// a second (meters, preset slots, values). Text from the show (preset names) goes in as text,
// never as markup.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const controls = new Map(); // name -> {spec, show(value), value, touched, held, row, ...}
const SEND_MS = 33; // a dragged slider sends at most ~30 messages a second
// A control under the performer's finger, and for HOLD_MS after they let go, keeps what they
// set: the show's values for it wait (the latest kept) and are shown once the hold is over.
const HOLD_MS = 800;
let socket = null;
let retry = 500;
let built = "";
let beat = {at: 0, beat: 0, bpm: 120, barPhase: 0};
let lastOnsets = null;
let refusedTotal = 0;

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// ---- the curves of control/parameters/registry.py (curve_value, curve_position) -------------------------

function curveValue(x, lo, hi, curve) {
  if (curve === "linear") return lo + x * (hi - lo);
  if (lo > 0) return lo * Math.pow(hi / lo, x);
  return lo + x * x * (hi - lo);
}

function curvePosition(v, lo, hi, curve) {
  if (!(hi > lo)) return 0;
  let x;
  if (curve === "linear") x = (v - lo) / (hi - lo);
  else if (lo > 0) x = Math.log(Math.max(v, lo) / lo) / Math.log(hi / lo);
  else x = Math.sqrt(Math.max(v - lo, 0) / (hi - lo));
  return Math.min(Math.max(x, 0), 1);
}

function fromNorm(spec, x) {
  const [lo, hi] = spec.play;
  const v = Math.min(Math.max(curveValue(x, lo, hi, spec.curve), lo), hi);
  return spec.kind === "int" ? Math.round(v) : v;
}

function format(spec, v) {
  if (typeof v !== "number") return String(v);
  if (spec.kind === "int") return v.toLocaleString("en");
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.001 || a >= 100000)) return v.toExponential(2);
  return String(Number(v.toPrecision(a >= 100 ? 4 : 3)));
}

// ---- the socket ---------------------------------------------------------------------------

function send(address, ...args) {
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify([address, ...args]));
    return true;
  }
  return false;
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  socket = new WebSocket(`${scheme}://${location.host}/ws${query}`);
  socket.onopen = () => { retry = 500; linkState("live", "connected"); };
  socket.onmessage = (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch (e) { return; }
    if (message.type === "hello") build(message);
    else if (message.type === "state") update(message);
  };
  socket.onclose = () => {
    linkState("", "disconnected: retrying");
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 5000);
  };
}

function linkState(cls, text) {
  $("link").className = "dot " + cls;
  $("link-text").textContent = text;
  document.body.dataset.link = cls || "down";
}

// ---- building the controls from the hello ------------------------------------------------

function build(hello) {
  const key = JSON.stringify(hello.groups);
  if (key === built) return; // a reconnect to the same show keeps the page as it is
  built = key;
  const specs = new Map(hello.params.map((p) => [p.name, p]));
  const root = $("params");
  root.replaceChildren();
  controls.clear();
  const narrow = matchMedia("(max-width: 720px)").matches;
  hello.groups.forEach((group, index) => {
    const box = el("details", "panel group");
    box.open = !narrow || index === 0;
    box.dataset.group = group.name;
    box.append(el("summary", "", group.name));
    const rows = el("div", "rows");
    for (const name of group.params) rows.append(row(specs.get(name)));
    box.append(rows);
    root.append(box);
  });
}

function row(spec) {
  const item = el("div", "row kind-" + spec.kind);
  item.dataset.param = spec.name;
  const head = el("div", "row-head");
  const label = el("button", "label", spec.name.replaceAll("_", " "));
  label.type = "button";
  label.title = spec.description;
  const about = el("div", "about", spec.description);
  label.addEventListener("click", () => item.classList.toggle("open"));
  const value = el("output", "value");
  head.append(label, value);
  item.append(head);
  const control = {spec, row: item, touched: -Infinity, held: false, value: spec.default,
                   fromShow: undefined, timer: 0};
  if (spec.kind === "float" || spec.kind === "int") slider(control, item, value);
  else if (spec.kind === "bool") toggle(control, item, value);
  else if (spec.kind === "choice") choice(control, item, value);
  else if (spec.kind === "color") color(control, item, value);
  item.append(about);
  controls.set(spec.name, control);
  control.show(spec.default);
  return item;
}

function slider(control, item, output) {
  const spec = control.spec;
  const track = el("div", "slider");
  track.tabIndex = 0;
  track.setAttribute("role", "slider");
  track.setAttribute("aria-label", spec.name);
  track.setAttribute("aria-valuemin", "0");
  track.setAttribute("aria-valuemax", "1");
  const fill = el("i", "fill");
  const thumb = el("b", "thumb");
  track.append(fill, thumb);
  item.append(track);
  let norm = 0;
  let pending = null;
  let timer = 0;
  let sentAt = 0;
  const place = (x) => {
    norm = x;
    track.style.setProperty("--x", x.toFixed(4));
    track.setAttribute("aria-valuenow", x.toFixed(3));
  };
  control.show = (v) => {
    control.value = v;
    output.textContent = format(spec, v);
    track.setAttribute("aria-valuetext", output.textContent);
    place(curvePosition(v, spec.play[0], spec.play[1], spec.curve));
  };
  const flush = () => {
    timer = 0;
    if (pending === null) return;
    send(`/swarm/${spec.name}/norm`, Number(pending.toFixed(5)));
    sentAt = performance.now();
    pending = null;
  };
  const move = (x) => {
    x = Math.min(Math.max(x, 0), 1);
    touch(control);
    place(x);
    output.textContent = format(spec, fromNorm(spec, x));
    track.setAttribute("aria-valuetext", output.textContent);
    pending = x;
    const wait = SEND_MS - (performance.now() - sentAt);
    if (wait <= 0) flush();
    else if (!timer) timer = setTimeout(flush, wait);
  };
  // A mouse jumps to where it clicks; a finger drags from where the value is (a tap or a
  // scroll across a slider never moves it: only a sideways drag does).
  let drag = null;
  track.addEventListener("pointerdown", (event) => {
    const box = track.getBoundingClientRect();
    drag = {id: event.pointerId, x0: event.clientX, y0: event.clientY, n0: norm,
            width: box.width, left: box.left, live: event.pointerType === "mouse"};
    track.setPointerCapture(event.pointerId);
    control.held = true;
    if (drag.live) move((event.clientX - box.left) / box.width);
    touch(control);
  });
  track.addEventListener("pointermove", (event) => {
    if (!drag || event.pointerId !== drag.id) return;
    const dx = event.clientX - drag.x0;
    if (!drag.live) {
      if (Math.abs(event.clientY - drag.y0) > 12 && Math.abs(dx) < 8) { drag = null; return; }
      if (Math.abs(dx) < 6) return;
      drag.live = true;
      drag.x0 = event.clientX;
      return;
    }
    if (event.pointerType === "mouse") move((event.clientX - drag.left) / drag.width);
    else move(drag.n0 + (event.clientX - drag.x0) / drag.width);
  });
  const end = () => {
    drag = null;
    if (timer) { clearTimeout(timer); flush(); }
    control.held = false;
    touch(control);
  };
  track.addEventListener("pointerup", end);
  track.addEventListener("pointercancel", end);
  track.addEventListener("lostpointercapture", end);
  track.addEventListener("keydown", (event) => {
    const step = event.shiftKey || event.key.startsWith("Page") ? 0.1 : 0.01;
    const moves = {ArrowRight: step, ArrowUp: step, PageUp: step, ArrowLeft: -step,
                   ArrowDown: -step, PageDown: -step};
    if (event.key in moves) move(norm + moves[event.key]);
    else if (event.key === "Home") move(0);
    else if (event.key === "End") move(1);
    else return;
    event.preventDefault();
  });
}

function toggle(control, item, output) {
  const spec = control.spec;
  const button = el("button", "switch");
  button.type = "button";
  button.setAttribute("role", "switch");
  button.setAttribute("aria-label", spec.name);
  button.append(el("i"));
  item.querySelector(".row-head").append(button);
  control.show = (v) => {
    control.value = v;
    button.setAttribute("aria-checked", v ? "true" : "false");
    output.textContent = v ? "on" : "off";
  };
  button.addEventListener("click", () => {
    touch(control);
    const next = !control.value;
    if (send(`/swarm/${spec.name}`, next)) control.show(next);
  });
}

function choice(control, item, output) {
  const spec = control.spec;
  const segmented = spec.choices.length <= 4;
  let pick;
  if (segmented) {
    pick = el("div", "segments");
    pick.setAttribute("role", "radiogroup");
    pick.setAttribute("aria-label", spec.name);
    for (const option of spec.choices) {
      const button = el("button", "segment", String(option));
      button.type = "button";
      button.dataset.value = String(option);
      button.setAttribute("role", "radio");
      button.addEventListener("click", () => {
        touch(control);
        if (send(`/swarm/${spec.name}`, option)) control.show(option);
      });
      pick.append(button);
    }
  } else {
    pick = el("select", "select");
    pick.setAttribute("aria-label", spec.name);
    spec.choices.forEach((option, index) => {
      const entry = el("option", "", String(option));
      entry.value = String(index);
      pick.append(entry);
    });
    pick.addEventListener("change", () => {
      touch(control);
      const option = spec.choices[Number(pick.value)];
      if (send(`/swarm/${spec.name}`, option)) control.show(option);
    });
  }
  item.append(pick);
  control.show = (v) => {
    control.value = v;
    output.textContent = "";
    if (segmented) {
      for (const button of pick.children) {
        button.setAttribute("aria-checked", button.dataset.value === String(v) ? "true" : "false");
      }
    } else {
      const index = spec.choices.findIndex((c) => String(c) === String(v));
      if (index >= 0) pick.value = String(index);
    }
  };
}

function color(control, item, output) {
  const spec = control.spec;
  const input = el("input", "swatch");
  input.type = "color";
  input.setAttribute("aria-label", spec.name);
  item.querySelector(".row-head").append(input);
  let timer = 0;
  control.show = (v) => {
    control.value = v;
    input.value = v;
    output.textContent = v;
  };
  input.addEventListener("input", () => {
    touch(control);
    output.textContent = input.value;
    if (!timer) {
      timer = setTimeout(() => { timer = 0; send(`/swarm/${spec.name}`, input.value); }, SEND_MS);
    }
  });
}

// ---- what the show pushes ---------------------------------------------------------------

function bar(id, value) {
  const v = Math.min(Math.max(Number(value) || 0, 0), 1);
  const meter = $(id);
  meter.style.setProperty("--v", v.toFixed(3));
  meter.dataset.value = v.toFixed(3);
}

function update(state) {
  const m = state.meters;
  if (m) {
    bar("m-level", m.level);
    bar("m-low", m.low);
    bar("m-mid", m.mid);
    bar("m-high", m.high);
    const onset = $("onset");
    if (lastOnsets !== null && m.onsets > lastOnsets) {
      onset.classList.remove("hit");
      void onset.offsetWidth; // restart the flash
      onset.classList.add("hit");
    }
    lastOnsets = m.onsets;
    onset.dataset.onsets = m.onsets;
    $("bpm").textContent = m.bpm == null ? "--" : m.bpm.toFixed(1);
    const source = m.tempo_source === "none" ? "no clock" : m.tempo_source;
    $("tempo-source").textContent = source + (m.held && m.tempo_source !== "none" ? ", held" : "");
    $("frame-ms").textContent = m.frame_ms == null ? "--" : m.frame_ms.toFixed(1);
    $("fps").textContent = m.fps == null ? "" : `${Math.round(m.fps)} fps`;
    $("meters").dataset.audio = m.audio;
    beat = {at: performance.now(), beat: m.beat || 0, bpm: m.bpm || 0, barPhase: m.bar_phase || 0};
  }
  if (state.slots) slots(state.slots, state.preset || {});
  if (state.outputs) outputs(state.outputs);
  if (state.autopilot) autopilotPanel(state.autopilot); // autopilot.js
  if (state.values) {
    for (const [name, value] of Object.entries(state.values)) {
      const control = controls.get(name);
      if (control) {
        control.fromShow = value;
        settle(control);
      }
    }
  }
  if (state.refused && state.refused.refused) {
    refusedTotal += state.refused.refused;
    $("status").textContent = `${refusedTotal} refused: ${state.refused.reason}`;
  }
}

// The performer moved a control: the show's values for it wait until HOLD_MS after this.
function touch(control) {
  control.touched = performance.now();
  settle(control);
}

// The show's latest value for a control, shown now unless the performer holds the control
// (touching it, or let go less than HOLD_MS ago): then shown when the hold is over, so a value
// that changed meanwhile (MIDI, OSC, a recall) is never lost, and one the show did not take
// is put back.
function settle(control) {
  clearTimeout(control.timer);
  control.timer = 0;
  if (control.fromShow === undefined) return;
  const wait = control.touched + HOLD_MS - performance.now();
  if (control.held || wait > 0) {
    control.timer = setTimeout(() => settle(control), control.held ? HOLD_MS : wait + 1);
    return;
  }
  control.show(control.fromShow);
}

function slots(names, preset) {
  const grid = $("presets");
  if (!grid.children.length) {
    for (let slot = 1; slot <= 9; slot++) {
      const button = el("button", "slot");
      button.type = "button";
      button.dataset.slot = String(slot);
      button.append(el("span", "number", String(slot)), el("span", "title", ""));
      button.addEventListener("click", () => {
        if (!button.classList.contains("empty")) send("/swarm/preset", slot);
      });
      grid.append(button);
    }
  }
  for (const button of grid.children) {
    const name = names[button.dataset.slot];
    button.querySelector(".title").textContent = name || "empty";
    button.classList.toggle("empty", !name);
    button.disabled = !name;
    button.setAttribute("aria-pressed", preset.slot === Number(button.dataset.slot) ? "true" : "false");
  }
  const name = preset.name ? preset.name + (preset.modified ? " (modified)" : "") : "";
  $("preset-name").textContent = name;
  const morph = preset.morph == null ? 0 : preset.morph; // none under way: an empty bar
  $("morph-bar").style.setProperty("--v", morph.toFixed(3));
  $("morph-bar").parentElement.classList.toggle("running", preset.morph != null);
}

// The video outputs (--out-ndi, --out-stream, ...): one button each, lit while on air; a tap
// takes it off air or back (OSC's /swarm/outputs N 0|1).
function outputs(list) {
  $("outputs-panel").hidden = list.length === 0;
  const grid = $("outputs");
  while (grid.children.length > list.length) grid.lastChild.remove();
  while (grid.children.length < list.length) {
    const number = grid.children.length + 1;
    const button = el("button", "slot output");
    button.type = "button";
    button.dataset.output = String(number);
    button.append(el("span", "title", ""), el("span", "title detail", ""));
    button.addEventListener("click", () => {
      send("/swarm/outputs", number, button.getAttribute("aria-pressed") === "true" ? 0 : 1);
    });
    grid.append(button);
  }
  list.forEach((output, index) => {
    const button = grid.children[index];
    const [title, detail] = button.querySelectorAll(".title");
    title.textContent = output.label;
    detail.textContent = output.live
      ? `${output.state}, ${output.sent} sent, ${output.dropped} dropped` : "off air";
    button.setAttribute("aria-pressed", output.live ? "true" : "false");
  });
}

// The beat between pushes: the show's beat moved on at its tempo.
function tick() {
  const beats = beat.beat + (performance.now() - beat.at) / 1000 * beat.bpm / 60;
  const barPhase = beat.barPhase + (beats - beat.beat) / 4;
  const step = Math.floor((((barPhase % 1) + 1) % 1) * 4);
  const flash = beats - Math.floor(beats) < 0.25;
  $("beats").querySelectorAll("i").forEach((dot, index) => {
    dot.className = index === step ? (flash ? "on hit" : "on") : "";
  });
  requestAnimationFrame(tick);
}

document.addEventListener("DOMContentLoaded", () => {
  // Tap and downbeat go on the press (their timing is the point); respawn and burst on the
  // release, as a deliberate click. A key (Enter, Space) clicks with detail 0.
  for (const button of document.querySelectorAll("button.action")) {
    const fire = () => {
      send(button.dataset.address);
      button.classList.remove("hit");
      void button.offsetWidth;
      button.classList.add("hit");
    };
    const onPress = button.id === "do-tap" || button.id === "do-downbeat";
    if (onPress) button.addEventListener("pointerdown", fire);
    button.addEventListener("click", (event) => { if (!onPress || event.detail === 0) fire(); });
  }
  slots({}, {});
  connect();
  requestAnimationFrame(tick);
});
