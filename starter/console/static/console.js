// The console's own code, a file rather than inline: the CSP (script-src
// 'self') runs no inline script, handler attribute or htmx eval.
"use strict";

// The status part (#agent-live) refreshes every 3 s; not while the operator
// types in it (an approval's note), which the refresh would wipe.
document.addEventListener("htmx:beforeRequest", (event) => {
  const elt = event.detail.elt;
  const active = document.activeElement;
  if (elt.id === "agent-live" && active && active.closest("#agent-live")) {
    event.preventDefault();
  }
});

// A message sent from the chat box clears the box.
document.addEventListener("htmx:afterRequest", (event) => {
  const elt = event.detail.elt;
  if (elt.id === "chat-form" && event.detail.successful) {
    elt.reset();
  }
});
