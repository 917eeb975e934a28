// The console's only script (CSP: no inline script). Re-renders every [data-refresh] region in place every
// few seconds, asks before bulk actions, and selects all rows. Pages work without it, minus the live updates.
"use strict";

(function () {
  const body = document.body;
  const periodMs = Math.max(1, parseFloat(body.dataset.refreshS || "3")) * 1000;

  // A region is left alone while the operator is using it (a ticked box, a focused field).
  function busy(region) {
    if (region.querySelector("input[type=checkbox]:checked")) return true;
    const active = document.activeElement;
    return active !== null && active !== body && region.contains(active) && active.matches("input, select, textarea");
  }

  async function refresh() {
    const regions = document.querySelectorAll("[data-refresh][id]");
    if (regions.length === 0 || document.hidden) return;
    let response;
    try {
      response = await fetch(window.location.href, { headers: { "X-Console-Refresh": "1" }, credentials: "same-origin" });
    } catch (err) {
      return; // the API is restarting: try again next period
    }
    if (!response.ok || response.redirected) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const region of regions) {
      const replacement = fresh.getElementById(region.id);
      if (replacement && !busy(region)) region.replaceWith(document.importNode(replacement, true));
    }
    body.dataset.refreshedAt = String(Date.now());
  }

  function schedule() {
    window.setTimeout(async () => {
      await refresh();
      schedule();
    }, periodMs);
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    const question = form.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!box.matches("[data-select-all]")) return;
    const scope = box.closest("form") || document;
    for (const other of scope.querySelectorAll("input[type=checkbox][name=ids]")) other.checked = box.checked;
  });

  schedule();
})();
