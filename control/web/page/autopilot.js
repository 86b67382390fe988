// The web remote's autopilot panel (app.js calls autopilotPanel with each push): who is in
// control (and when the autopilot takes the look back), the section heard and its bar, the
// look, the next planned change; the switch and "resume now". The words are the show's
// (show/autopilot/autopilot_view.py), the same as the control window's. The switch shows what
// the show says, never what was pressed: on a show started without --autopilot a press is
// answered with the line that says how to have one. "Resume now" is one of the page's action
// buttons (app.js sends its data-address).
"use strict";

function autopilotPanel(pilot) {
  const panel = document.getElementById("autopilot-panel");
  const [where, coming, who] = pilot.lines || ["", "", ""];
  panel.dataset.control = pilot.available ? pilot.control : "none";
  panel.classList.toggle("said", Boolean(pilot.said));
  // a command-line option (--autopilot) is never broken across lines at its hyphens
  const line = document.getElementById("pilot-who");
  line.replaceChildren(...who.split(/(--[a-z-]+)/).map((part) => (part.startsWith("--")
    ? el("span", "option", part) : document.createTextNode(part))));
  document.getElementById("pilot-where").textContent = where;
  document.getElementById("pilot-next").textContent = coming;
  document.getElementById("autopilot-switch").setAttribute("aria-checked",
                                                           pilot.on ? "true" : "false");
  // the performer has the look, or it is off: "resume now" hands it back
  document.getElementById("pilot-resume").hidden = !pilot.available
    || pilot.control === "autopilot";
}

document.addEventListener("DOMContentLoaded", () => {
  const toggle = document.getElementById("autopilot-switch");
  toggle.addEventListener("click", () => {
    send("/swarm/autopilot", toggle.getAttribute("aria-checked") === "true" ? 0 : 1);
  });
});
